"""seglog: an embeddable, durable, high-throughput segmented message log.

    import seglog
    with seglog.open("data") as log:
        topic = log.create_topic("events", partitions=4)
        with topic.producer() as producer:
            producer.send(b"hello", key=b"user-1")
        for message in topic.reader("earliest", partition=0):
            ...
"""

from seglog._core._messages import Message, MessageId
from seglog.clock import ManualClock, system_clock
from seglog.dead_letters import DeadLetterPolicy
from seglog.errors import SeglogError
from seglog.log import Log, is_data_directory, open  # noqa: A004 - seglog.open, as the README uses it
from seglog.producer import Producer
from seglog.storage.reader import Reader
from seglog.topic import Topic
from seglog.version import __version__

__all__ = ["DeadLetterPolicy", "Log", "ManualClock", "Message", "MessageId", "Producer", "Reader", "SeglogError",
           "Topic",
           "is_data_directory", "open", "system_clock", "__version__"]
