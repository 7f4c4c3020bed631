"""Files and partitions: segments, the batch format's Python side, writers, readers' views of a partition,
recovery, checks, writer locks and topic fences. Knows nothing of topics' policies or subscriptions."""
