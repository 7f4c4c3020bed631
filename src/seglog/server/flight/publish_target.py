"""A topic of the server as staged rows are published to it (storage/publication.py's PublishTarget), on the
broker's services: every partition's writer held for the publishing, each append checked as an in-process
producer's send_batch is checked (a compacted topic's keys, then the backlog quotas, a producer_request_hold quota
waited out for up to SEND_TIMEOUT_S), and announced to the replication as a producer's SEND is."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from seglog.catalog.message_keys import KeysRequired
from seglog.catalog.topics import TopicRef
from seglog.server.service import BrokerService
from seglog.storage.publication import send_arguments
from seglog.storage.range_read import read_range
from seglog.storage.writer import PartitionWriter

SEND_TIMEOUT_S = 30.0  # an in-process producer's default send_timeout


class ServerTarget:
    """`ref`'s partitions, their writers taken on entering and given back on leaving."""

    def __init__(self, service: BrokerService, ref: TopicRef) -> None:
        self._service = service
        self._broker = service.broker
        self.ref = ref
        self._fence = self._broker.store.fence(ref.name)
        self._keys = KeysRequired(self._broker.catalog, ref.name)
        self._quota = self._broker.quotas.guard(ref)
        self._quota_armed = False
        self._writers: list[PartitionWriter] = []

    def __enter__(self) -> ServerTarget:
        self._fence.check()
        store = self._broker.store
        try:
            for partition in range(self.ref.partitions):
                self._writers.append(store.acquire_writer(self.ref.name, partition, self.ref.config))
        except BaseException:
            self.__exit__()
            raise
        self._quota.register(self._arm_quota)
        return self

    def __exit__(self, *exc: object) -> None:
        for partition in range(len(self._writers)):
            self._broker.store.release_writer(self.ref.name, partition, self._fence)
        self._writers.clear()

    def _arm_quota(self, armed: bool) -> None:
        """The topic has backlog quotas (armed) or none (QuotaGuard.register)."""
        self._quota_armed = armed

    @property
    def partitions(self) -> int:
        return self.ref.partitions

    def end_offset(self, partition: int) -> int:
        return self._broker.store.end_offset(self.ref.name, partition)

    def read(self, partition: int, start: int, end: int) -> Iterator[pa.RecordBatch]:
        return read_range(self._broker.store, self.ref.name, partition, start, end,
                          verify_crc=self._broker.config.verify_crc)

    def append(self, rows: pa.RecordBatch, partition: int) -> None:
        self._fence.check()
        values, keys, timestamps, properties = send_arguments(rows, self._broker.clock())
        keys = self._keys.checked_keys(keys)
        writer = self._writers[partition]
        source = writer.source(values, keys, timestamps, properties)
        if self._quota_armed:
            self._quota.check(partition, source.size(0, source.count), SEND_TIMEOUT_S, writer.flush_pending)
        offset = writer.append(source)
        if self._service.on_append is not None:
            self._service.on_append(str(self.ref.name), partition, offset, rows.num_rows, None)
