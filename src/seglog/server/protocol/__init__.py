"""Pulsar's binary protocol as seglog speaks it: frames and commands, pure (no I/O, no broker).

`pulsar_api.proto` is seglog's own description of the commands (pulsar_api_pb2.py is generated from it and
committed); `frames.py` cuts a byte stream into frames and builds frames; `batches.py` unpacks the messages of
a SEND's payload; `message_ids.py` maps Pulsar's message ids to seglog's offsets."""
