"""The replication of a cluster: which replicators run, from the catalog's replication policies.

For every topic partition and every cluster of the topic's applied replication set other than this one
(Catalog.replication_clusters: the local topic policy, else the global one, else the namespace's clusters),
one Replicator runs. The service looks again whenever a policy changes (Catalog.on_topic_policies_changed),
so changing a namespace's clusters starts or stops replication at once, without a restart. A look costs what
changed: a topic created here, or whose own policies changed, is looked at alone, and only a change that may
reach any topic (a namespace's, a cluster's, or one the catalog is not told the topic of) looks at every
topic. Every RECONCILE_S the service compares the topics' names with those it knows, to find the topics
another process created or deleted (one query of the names, no policies read), and looks at those. A
cluster leaving a topic's set stops its replicators and deletes their cursor (`pulsar.repl.REMOTE`), which
would otherwise hold the backlog forever, as Pulsar's broker does.

Where a new cursor starts (Pulsar's replicationStartAt = latest): at the end for a topic that existed when
replication to that cluster began; at the start for a topic created since, whose cursors are made by the
thread that creates it, before anything is written (Catalog.on_topic_created), or, for a topic another
process created, at the service's first look at it. The remote's copy of a partitioned topic is created
with the same partitions through its admin API (createTopicToRemoteClusterForReplication) before the
replicators produce to its partitions; a non-partitioned one is created by the replicator's producer, as by
any producer. With a shared or synchronized configuration store the partitioned topic's metadata is the
store's: a remote lacking it has not applied it yet, or it was deleted there and the deletion is on its way
here, so the replicator waits instead of creating it again (which would bring a deleted topic back
everywhere)."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Executor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp

from seglog.broker import Broker
from seglog.catalog.clusters import token_parameter
from seglog.catalog.policies import GlobalPolicies
from seglog.catalog.topics import TopicRef
from seglog.errors import NotFoundError, TopicNotFoundError
from seglog.names import TopicName
from seglog.replication.client import RemoteCluster, RemoteConnection, RemoteProducer, RemoteUnavailable
from seglog.replication.config_store import EtcdConfigurationStore
from seglog.replication.config_sync import ConfigurationSync
from seglog.replication.replicated_subscriptions import ReplicatedSubscriptions
from seglog.replication.replicator import Replicator
from seglog.server.protocol.metadata import REPLICATOR_PREFIX, replicator_name
from seglog.server.rest.errors import RestError
from seglog.subscriptions.subscription import Subscription

logger = logging.getLogger("seglog.replication")

RECONCILE_S = 1.0
STOP_TIMEOUT_S = 10.0
HTTP_TIMEOUT_S = 30.0
GROWTH_TIMEOUT_S = 120.0  # a growth the configuration store brings waits this long for the replicators to pause


# (topic, partition, origin cluster, payload, position where it arrived) -> None, on the loop
MarkerHandler = Callable[[str, int, str, bytes, int], None]
# a topic's global policies changed on this cluster: (topic, policies, partitions, the clusters they go to)
_Global = tuple[str, "GlobalPolicies", int, list[str]]


@dataclass(frozen=True)
class _Key:
    topic: str
    partition: int
    remote: str


class ReplicationService:
    def __init__(self, broker: Broker, local: str, executor: Executor, *,
                 configuration_store: str | None = None, configuration_sync_topic: str | None = None) -> None:
        self.broker = broker
        self.local = local
        # with `configuration_store` (etcd://...), the catalog mirrors that shared store (config_store.py)
        self.configuration_store = (None if configuration_store is None
                                    else EtcdConfigurationStore(broker, local, configuration_store,
                                                                self._grow_as_shared))
        # with `configuration_sync_topic`, it is synchronized through that replicated topic (config_sync.py)
        self.configuration_sync = (None if configuration_sync_topic is None
                                   else ConfigurationSync(broker, local, configuration_sync_topic, self.appended,
                                                          self._grow_as_shared))
        self._executor = executor
        # topic -> its replicators (by topic: a look at one topic touches its own only)
        self._replicators: dict[str, dict[_Key, Replicator]] = {}
        # the same by partition, for the writers' threads (appended), which read it without a lock: each
        # partition's tuple is replaced, never changed in place
        self._partition_replicators: dict[tuple[str, int], tuple[Replicator, ...]] = {}
        # topic -> remote -> its cursor pulsar.repl.REMOTE, opened from the loop's pool or a creating thread
        self._cursors: dict[str, dict[str, Subscription]] = {}
        self._stale_cursors: list[Subscription] = []  # held of topics deleted since, to let go (_cursor)
        self._cursors_lock = threading.Lock()
        self._connections: dict[str, RemoteConnection] = {}
        self._connecting: dict[str, asyncio.Lock] = {}
        self._known_topics: set[str] | None = None  # topics the looks found (None: no look over all yet)
        self._changed = asyncio.Event()  # set with what changed: _look_at_all, or topics in _changed_topics
        self._look_at_all = True  # (the first look is over every topic)
        self._changed_topics: set[str] = set()
        self._unpushed: set[str] = set()  # topics whose global policies some remote has yet to take
        self._task: asyncio.Task[None] | None = None
        self._http: aiohttp.ClientSession | None = None
        self._stopped = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        # held by each look and by a topic's growth: no look starts a replicator of a topic growing
        self._reconciling = asyncio.Lock()
        self._marker_handlers: dict[int, MarkerHandler] = {}
        # the stamp of the global policies last delivered, per (topic, remote)
        self._pushed: dict[tuple[str, str], tuple[int, str]] = {}
        self.subscriptions = ReplicatedSubscriptions(broker, local, self, executor)

    def start(self) -> None:
        if self.configuration_store is not None:  # (first: the catalog is in sync before anything reads it)
            self.configuration_store.start()
        loop = self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=HTTP_TIMEOUT_S))

        def changed(topic: TopicName | None) -> None:  # (any thread)
            try:
                loop.call_soon_threadsafe(self._note_change, None if topic is None else str(topic))
            except RuntimeError:
                pass
        self.broker.catalog.on_topic_policies_changed(changed)

        def created(ref: TopicRef) -> None:  # (the creating thread, before the topic is written to)
            if self._stopped:
                return
            try:
                self._cursors_for_new_topic(ref)
            except Exception:  # (the topic is made: its creator must not fail; the next look retries)
                logger.exception("replication: making the cursors of the new topic %s failed", ref)
            changed(ref.name)
        self.broker.catalog.on_topic_created(created)
        self._task = loop.create_task(self._run())
        self.subscriptions.start()
        if self.configuration_sync is not None:  # (after `created`: a sync topic made now replicates from its start)
            self.configuration_sync.start()

    async def stop(self) -> None:
        self._stopped = True
        if self.configuration_store is not None:
            self.configuration_store.stop()
        if self.configuration_sync is not None:
            self.configuration_sync.stop()
        await self.subscriptions.stop()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for key in [key for replicators in list(self._replicators.values()) for key in replicators]:
            await self._stop_replicator(key)
        with self._cursors_lock:
            cursors = [cursor for remotes in self._cursors.values() for cursor in remotes.values()]
            cursors += self._stale_cursors
            self._cursors, self._stale_cursors = {}, []
        for subscription in cursors:
            await self._blocking(self.broker.subscriptions.release, subscription)
        for connection in self._connections.values():
            await connection.close()
        if self._http is not None:
            await self._http.close()

    def on_marker(self, marker_type: int, handler: MarkerHandler) -> None:
        """Have markers of `marker_type` that other clusters' replicators send here go to `handler` (replicated
        subscriptions' snapshot markers will), called on the loop."""
        self._marker_handlers[marker_type] = handler

    def marker_received(self, topic: str, partition: int, origin: str, marker_type: int, payload: bytes,
                        position: int) -> None:
        """server.app.Extension: a marker arrived (the server's thread pool): to its handler, on the loop."""
        handler = self._marker_handlers.get(marker_type)
        if handler is None:
            logger.debug("replication: marker type %d from %s on %s ignored (no handler)", marker_type, origin, topic)
            return
        assert self._loop is not None  # (started before the server serves)
        self._loop.call_soon_threadsafe(handler, topic, partition, origin, payload, position)

    def appended(self, topic: str, partition: int, first: int, count: int, origin: str | None) -> None:
        """server.app.Extension: messages were appended (a writer's thread). Produced here, they wake the
        partition's replicators: they have something to send. From another cluster, they never leave again:
        each replicator records them and acknowledges them at its next take, unread (reading each only to
        acknowledge it cost a cluster that receives unbatched messages a tenth of its time)."""
        for replicator in self._partition_replicators.get((topic, partition), ()):
            if origin is None:
                replicator.appended()
            else:
                replicator.replicated_here(first, count)

    def send_marker(self, topic: str, partition: int, remote: str, marker_type: int, payload: bytes) -> bool:
        """Send a marker to `remote` on the partition's replication stream, after every message written so far
        (loop thread); False when no replicator of the partition goes there."""
        replicator = self._replicators.get(topic, {}).get(_Key(topic, partition, remote))
        if replicator is None:
            return False
        replicator.send_marker(self.broker.store.end_offset(TopicName.parse(topic), partition), marker_type, payload)
        return True

    async def grow_topic(self, topic: str, partitions: int, local_only: bool) -> None:
        """server.app.Extension: give a partitioned topic more partitions, as Pulsar's update-partitioned-topic
        does with a replicated topic. Its replicators stop and let their cursors go meanwhile (they would hold
        it in use), and start again after on every partition: a cursor reads the partitions it did not have
        from their start. With independent configuration stores the clusters it replicates to grow their
        copies first, through their admin API, each told to grow only its own (`local_only` is how this
        cluster is told), once this cluster has found nothing to refuse here; a shared or synchronized store
        carries the growth to them itself. A remote that refuses or cannot be reached stops the growth with
        RestError (its status for a refusal, 503 when unreachable), nothing changed here; remotes grown before
        it stay grown, which replication bears (partition i goes to partition i) until the growth is asked
        again."""
        async with self._replicators_paused(topic):
            if not local_only and self.broker.catalog.configuration_store is None:
                await self._blocking(self.broker.check_growth, topic, partitions)
                remotes = await self._blocking(self.broker.catalog.replication_clusters, TopicName.parse(topic),
                                               self.local)
                for remote in sorted(remotes - {self.local}):
                    await self._grow_remote(remote, topic, partitions)
            await self._blocking(self.broker.update_partitions, topic, partitions)

    async def _grow_remote(self, remote: str, topic: str, partitions: int) -> None:
        """Grow `remote`'s copy of the topic to `partitions` (its own copy only). One it does not have yet,
        or has with as many partitions already, is left as it is: the replicator makes a missing one with
        every partition when it connects."""
        try:
            cluster, service_url = await self._admin_endpoint(remote, f"growing {topic} there")
            path = _partitions_path(topic)
            status, text = await self._admin(cluster, service_url, "GET", path)
            if status == 404 or (status == 200 and not 0 < json.loads(text)["partitions"] < partitions):
                return
            if status == 200:
                status, text = await self._admin(cluster, service_url, "POST",
                                                 f"{path}?updateLocalTopicOnly=true", partitions)
        except RemoteUnavailable as error:
            raise RestError(503, f"{error}; {topic} was not grown here") from None
        if status not in (200, 204):
            raise RestError(status if 400 <= status < 500 else 503,
                            f"cluster {remote} refused to grow {topic} to {partitions} partitions: {status} {text}; "
                            "it was not grown here")

    def _grow_as_shared(self, topic: str, partitions: int) -> None:
        """The configuration store's growth of a topic (its follower's thread): with the topic's replicators
        paused, as grow_topic's, once they may run; directly before the service runs on its loop."""
        def grow() -> None:  # (marked as the store's on whichever thread runs it: else it would go back there)
            with self.broker.catalog.metadata.applying_shared():
                self.broker.update_partitions(topic, partitions)

        loop = self._loop
        if loop is None or threading.get_ident() == self._loop_thread:
            grow()
            return
        asyncio.run_coroutine_threadsafe(self._paused_for(topic, grow), loop).result(GROWTH_TIMEOUT_S)

    async def _paused_for(self, topic: str, change: Callable[[], None]) -> None:
        async with self._replicators_paused(topic):
            await self._blocking(change)

    @asynccontextmanager
    async def _replicators_paused(self, topic: str) -> AsyncIterator[None]:
        """The topic's replicators stopped and their cursors let go inside; the look that follows starts
        them again."""
        async with self._reconciling:
            for key in list(self._replicators.get(topic, {})):
                await self._stop_replicator(key)
            with self._cursors_lock:
                cursors = list(self._cursors.pop(topic, {}).values())
            for subscription in cursors:
                await self._blocking(self.broker.subscriptions.release, subscription)
            try:
                yield
            finally:
                self._note_change(topic)

    def replicated_partitions(self) -> dict[tuple[str, int], dict[str, bool]]:
        """Every topic partition with replicators: remote cluster -> whether its replicator is connected."""
        partitions: dict[tuple[str, int], dict[str, bool]] = {}
        for replicators in self._replicators.values():
            for key, replicator in replicators.items():
                partitions.setdefault((key.topic, key.partition), {})[key.remote] = replicator.stats.connected
        return partitions

    def replicated_subscriptions_stats(self) -> dict[str, int]:
        """server.app.Extension: snapshot attempts pending, timed out and completed (ReplicatedSubscriptions.stats)."""
        return self.subscriptions.stats()

    def subscription_snapshots(self, topic: str, partition: int) -> dict[str, list[dict[str, Any]]]:
        """server.app.Extension: per replicated subscription of the partition, the snapshots it has not
        passed yet, oldest first: {'snapshotId', 'position' (offset here), 'clusters' ({remote: offset})}."""
        return {name: [{"snapshotId": s.snapshot_id, "position": s.position, "clusters": dict(s.positions)}
                       for s in snapshots]
                for name, snapshots in self.subscriptions.cached(topic, partition).items()}

    def replication_stats(self, topic: str, partition: int | None) -> dict[str, dict[str, Any]]:
        """Per remote cluster, the outbound half of Pulsar's ReplicatorStats for the seglog topic `topic`
        (one partition, or all of them: rates summed, `connected` only if every one is, the largest delay)."""
        stats: dict[str, dict[str, Any]] = {}
        for key, replicator in sorted(self._replicators.get(topic, {}).items(), key=lambda item: item[0].partition):
            if partition is not None and key.partition != partition:
                continue
            replicator.count_expired()
            rate, throughput = replicator.stats.out.rates()
            entry = stats.setdefault(key.remote, {
                "msgRateOut": 0.0, "msgThroughputOut": 0.0, "msgOutCounter": 0, "bytesOutCounter": 0,
                "msgRateExpired": 0.0,
                "connected": True, "replicationDelayInSeconds": 0,
                "outboundConnection": replicator.stats.outbound_connection,
                "outboundConnectedSince": replicator.stats.connected_since})
            entry["msgRateOut"] += rate
            entry["msgThroughputOut"] += throughput
            entry["msgRateExpired"] += replicator.stats.expired.rates()[0]
            entry["msgOutCounter"] += replicator.stats.out.messages
            entry["bytesOutCounter"] += replicator.stats.out.bytes
            entry["connected"] = entry["connected"] and replicator.stats.connected
            if replicator.stats.last_error:  # (seglog's key: why a replicator is not connected)
                entry["lastError"] = replicator.stats.last_error
            entry["replicationDelayInSeconds"] = max(entry["replicationDelayInSeconds"], replicator.delay_ms() // 1000)
        return stats

    def _note_change(self, topic: str | None) -> None:
        """(loop thread) Policies changed: those of `topic`, looked at alone, or with None any topic's."""
        if topic is None:
            self._look_at_all = True
        else:
            self._changed_topics.add(topic)
        self._changed.set()

    async def _run(self) -> None:
        next_scan = time.monotonic() + RECONCILE_S
        while True:
            self._changed.clear()
            every, topics = self._look_at_all, self._changed_topics
            self._look_at_all, self._changed_topics = False, set()
            try:
                if not every and time.monotonic() >= next_scan:
                    # every RECONCILE_S, however often changes come: topics other processes made or deleted,
                    # and global policies a remote has yet to take
                    next_scan = time.monotonic() + RECONCILE_S
                    topics |= await self._blocking(self._appeared_or_gone) | self._unpushed
                if every:
                    await self._look(None)
                elif topics:
                    await self._look(topics)
            except Exception:  # (one failed look never stops replication; it is tried again after the wait)
                logger.exception("replication: reconciling the replicators failed")
                self._look_at_all |= every
                self._changed_topics |= topics
            try:
                await asyncio.wait_for(self._changed.wait(), max(0.0, next_scan - time.monotonic()))
            except TimeoutError:
                pass

    def _appeared_or_gone(self) -> set[str]:
        """The topics created or deleted since the looks last saw them: by another process, or here between a
        look and the next (blocking: reads the topics' names, in one query)."""
        assert self._known_topics is not None
        return set(self.broker.catalog.topic_names()) ^ self._known_topics

    async def _look(self, topics: set[str] | None) -> None:
        """Run the replicators the policies ask for on `topics` (None: every topic), stop the others of theirs,
        and send their global policies changed here where they have not gone yet."""
        async with self._reconciling:
            wanted, new_topics, globals_ = await self._blocking(self._wanted, topics)
            await self._run_replicators(wanted, new_topics, topics)
        # (outside the lock: a remote that does not answer holds this up to HTTP_TIMEOUT_S, and a growth meanwhile)
        unpushed = set()
        for name, policies, partitions, targets in globals_:
            for remote in targets:
                if not await self._push_global_policies(remote, name, policies, partitions):
                    unpushed.add(name)
        self._unpushed = unpushed if topics is None else (self._unpushed - topics) | unpushed

    async def _run_replicators(self, wanted: dict[_Key, TopicRef], new_topics: set[str],
                               topics: set[str] | None) -> None:
        """Of `topics` (None: all), stop the replicators not wanted (their cursors dropped), start those wanted
        that do not run."""
        looked_at = list(self._replicators) if topics is None else [t for t in topics if t in self._replicators]
        # (and those of a topic of that name deleted since: made again, it gets replicators of its own)
        for key in [key for topic in looked_at for key, replicator in self._replicators[topic].items()
                    if key not in wanted or replicator.subscription.fence.deleted]:
            await self._stop_replicator(key)
        pairs = {(key.topic, key.remote) for key in wanted}
        with self._cursors_lock:
            with_cursors = list(self._cursors) if topics is None else [t for t in topics if t in self._cursors]
            dropped = [(topic, remote) for topic in with_cursors for remote in self._cursors[topic]
                       if (topic, remote) not in pairs]
            cursors = [self._pop_cursor(topic, remote) for topic, remote in dropped]
        for subscription in cursors:
            await self._blocking(self._drop_cursor, subscription)
        for key, ref in wanted.items():
            if key in self._replicators.get(key.topic, {}):
                continue
            start = "earliest" if key.topic in new_topics else "latest"
            cursor = await self._blocking(self._cursor, key.topic, key.remote, start)
            replicator = Replicator(cursor, key.partition, self.local, key.remote, ref.pulsar_name(key.partition),
                                    self._producer_factory(key, ref), self._executor, self.broker.clock,
                                    queue_size=self.broker.config.replication_producer_queue_size)
            replicator.start()
            self._replicators.setdefault(key.topic, {})[key] = replicator
            partition = (key.topic, key.partition)
            self._partition_replicators[partition] = self._partition_replicators.get(partition, ()) + (replicator,)
        await self._release_stale_cursors()

    async def _release_stale_cursors(self) -> None:
        """Let go the cursors _cursor set aside whose replicators have stopped (those of topics this look did
        not reach wait for a look at them)."""
        with self._cursors_lock:
            stopped = [cursor for cursor in self._stale_cursors
                       if all(replicator.subscription is not cursor
                              for replicator in self._replicators.get(str(cursor.ref.name), {}).values())]
            self._stale_cursors = [cursor for cursor in self._stale_cursors if cursor not in stopped]
        for cursor in stopped:
            await self._blocking(self.broker.subscriptions.release, cursor)

    def _pop_cursor(self, topic: str, remote: str) -> Subscription:
        """Take the cursor of `topic` toward `remote` out of those held (under _cursors_lock)."""
        remotes = self._cursors[topic]
        cursor = remotes.pop(remote)
        if not remotes:
            del self._cursors[topic]
        return cursor

    async def _stop_replicator(self, key: _Key) -> None:
        replicators = self._replicators[key.topic]
        replicator = replicators.pop(key)
        if not replicators:
            del self._replicators[key.topic]
        partition = (key.topic, key.partition)
        others = tuple(r for r in self._partition_replicators.get(partition, ()) if r is not replicator)
        if others:
            self._partition_replicators[partition] = others
        else:
            self._partition_replicators.pop(partition, None)
        try:
            await asyncio.wait_for(replicator.stop(), STOP_TIMEOUT_S)
        except Exception:  # (stopping goes on with the others)
            logger.exception("replication: stopping the replicator of %s partition %d to %s failed", key.topic,
                             key.partition, key.remote)

    def _wanted(self, topics: set[str] | None) -> tuple[dict[_Key, TopicRef], set[str], list[_Global]]:
        """Of `topics` (None: every topic), (the replicators the policies ask for, each with its topic; the
        topics the looks had not seen; the global policies changed here, with the clusters they go to).
        Blocking: reads the catalog, at once for every topic, or topic by topic."""
        catalog = self.broker.catalog
        if topics is None:
            found = catalog.topics_with_replication(self.local)
        else:
            found = []
            for name in sorted(topics):
                try:
                    found.append(catalog.topic_with_replication(TopicName.parse(name), self.local))
                except TopicNotFoundError:  # (deleted: its replicators stop, its cursors are let go)
                    pass
        names = {str(ref.name) for ref, _, _ in found}
        known = self._known_topics
        new_topics = set() if known is None else names - known
        self._known_topics = names if topics is None else ((known or set()) - topics) | names
        wanted: dict[_Key, TopicRef] = {}
        globals_: list[_Global] = []
        for ref, stamped, clusters in found:
            name = str(ref.name)
            if stamped.origin == self.local:
                # every cluster the topic may reach, those the new set leaves out included (they delete it)
                reach = catalog.allowed_clusters(ref.name.namespace_name, self.local)
                targets = (reach | (stamped.policies.replication_clusters or frozenset())) - {self.local}
                globals_.append((name, stamped, ref.partitions, sorted(targets)))
            for remote in clusters - {self.local}:
                for partition in range(ref.partitions):
                    wanted[_Key(name, partition, remote)] = ref
        return wanted, new_topics, globals_

    def _cursor(self, topic: str, remote: str, start: str) -> Subscription:
        """The replicator cursor of `topic` toward `remote`, opened (created at `start` if new) by whichever
        thread comes first: the one that created the topic, or the service's look (blocking). One held of a
        topic of that name deleted since (nothing tells the service of a deletion, and a topic may be made
        again before a look finds it gone) is set aside, for the look to let go once its replicator stopped."""
        with self._cursors_lock:
            cursor = self._cursors.get(topic, {}).get(remote)
            if cursor is None or cursor.fence.deleted:
                if cursor is not None:
                    self._stale_cursors.append(cursor)
                cursor = self.broker.subscriptions.open(self.broker.topic(topic), REPLICATOR_PREFIX + remote,
                                                        "exclusive", start)
                self._cursors.setdefault(topic, {})[remote] = cursor
            return cursor

    def _cursors_for_new_topic(self, ref: TopicRef) -> None:
        """A topic was just created here: its replication cursors start at its start."""
        for remote in self.broker.catalog.replication_clusters(ref.name, self.local) - {self.local}:
            self._cursor(str(ref.name), remote, "earliest")

    def _drop_cursor(self, subscription: Subscription) -> None:
        """A remote left the topic's replication set: its cursor goes (or is let go, with the topic)."""
        if subscription.fence.deleted:
            self.broker.subscriptions.release(subscription)
        else:
            self.broker.subscriptions.unsubscribe(subscription)

    # the remote side

    def _producer_factory(self, key: _Key, ref: TopicRef) -> Callable[[], Any]:
        async def producer() -> RemoteProducer:
            cluster, service_url = await self._blocking(self._cluster, key.remote)
            connection = await self._connection(cluster)
            await self._match_remote_topic(connection, service_url, key.topic, ref.partitions)
            return await connection.create_producer(ref.pulsar_name(key.partition),
                                                    replicator_name(self.local, key.remote))
        return producer

    def _cluster(self, name: str) -> tuple[RemoteCluster, str]:
        """The remote's broker URL and credentials, and its admin URL, as registered (blocking)."""
        try:
            data = self.broker.catalog.cluster_data(name)
        except NotFoundError:
            raise RemoteUnavailable(f"cluster {name} is not registered here") from None
        broker_url = data.get("brokerServiceUrl") or data.get("brokerServiceUrlTls") or ""
        service_url = data.get("serviceUrl") or data.get("serviceUrlTls") or ""
        if not broker_url:
            raise RemoteUnavailable(f"cluster {name} is registered without a brokerServiceUrl")
        return RemoteCluster(name, broker_url, _token(name, data), data.get("brokerClientTrustCertsFilePath")), \
            service_url

    async def _connection(self, cluster: RemoteCluster) -> RemoteConnection:
        lock = self._connecting.setdefault(cluster.name, asyncio.Lock())
        async with lock:
            connection = self._connections.get(cluster.name)
            if connection is None or connection.closed.is_set() or connection.cluster != cluster:
                if connection is not None:
                    await connection.close()
                connection = self._connections[cluster.name] = await RemoteConnection.open(cluster)
            return connection

    async def _match_remote_topic(self, connection: RemoteConnection, service_url: str, topic: str,
                                  partitions: int) -> None:
        """The remote's topic is of the local one's type: a non-partitioned topic is made there by the
        replicator's producer; a partitioned one with the same partitions through the remote's admin API
        (createTopicToRemoteClusterForReplication). A topic of the other type, or with fewer partitions, there
        is RemoteUnavailable, which stats show (connected false, lastError): nothing is replicated to it."""
        remote = connection.cluster
        name = f"persistent://{topic}"
        found = await connection.partitions(name)
        # (more there: a growth reached it first and has yet to finish here; partition i still goes to i)
        if found == (partitions if partitions > 1 else 0) or 1 < partitions < found:
            return
        if found:
            raise RemoteUnavailable(f"cluster {remote.name} has {topic} with {found} partitions, this cluster "
                                    f"{'with ' + str(partitions) if partitions > 1 else 'not partitioned'}: nothing "
                                    "is replicated until they match")
        if self.broker.catalog.configuration_store is not None:  # (shared or synchronized)
            raise RemoteUnavailable(f"cluster {remote.name} has no partitioned topic {topic} yet: the shared "
                                    "configuration store makes it there (or has deleted it)")
        if not self.broker.config.create_topic_to_remote_cluster_for_replication:
            raise RemoteUnavailable(f"cluster {remote.name} has no partitioned topic {topic}, and "
                                    "createTopicToRemoteClusterForReplication is off: create it there")
        admin_url = _admin_url(remote.name, service_url, f"making the partitioned topic {topic} there")
        status, text = await self._admin(remote, admin_url, "PUT", _partitions_path(topic), partitions)
        if status not in (204, 409):
            raise RemoteUnavailable(f"cluster {remote.name} refused to create {topic} with {partitions} partitions: "
                                    f"{status} {text}")
        if await connection.partitions(name) != partitions:  # (409: a non-partitioned topic of that name is there)
            raise RemoteUnavailable(f"cluster {remote.name} has a non-partitioned topic {topic}, this cluster one "
                                    f"with {partitions} partitions: nothing is replicated until they match")

    async def _push_global_policies(self, remote: str, topic: str, policies: GlobalPolicies, partitions: int) -> bool:
        """Send a topic's global policies, as changed here, to `remote` through its admin API, once per change;
        whether `remote` has them (False: it could not be reached, and the next periodic look tries again;
        applying them twice changes nothing)."""
        stamp = (policies.updated_ms, policies.origin)
        if self._pushed.get((topic, remote)) == stamp:
            return True
        try:
            cluster, service_url = await self._admin_endpoint(remote, f"sending the global policies of {topic}")
            path = f"/seglog/v1/topics/{quote(topic)}/global-policies"
            status, text = await self._admin(cluster, service_url, "PUT", path,
                                             {**policies.to_json(), "partitions": partitions})
            if status != 200:
                raise RemoteUnavailable(f"cluster {remote} refused the global policies of {topic}: {status} {text}")
        except RemoteUnavailable as error:
            logger.info("replication: global policies of %s to %s: %s; retrying", topic, remote, error)
            return False
        self._pushed[(topic, remote)] = stamp
        return True

    async def _admin_endpoint(self, remote: str, needed_for: str) -> tuple[RemoteCluster, str]:
        """The remote as registered and its admin API's URL; RemoteUnavailable, saying it is `needed_for`, when
        it was registered without one."""
        cluster, service_url = await self._blocking(self._cluster, remote)
        return cluster, _admin_url(remote, service_url, needed_for)

    async def _admin(self, cluster: RemoteCluster, service_url: str, method: str, path: str,
                     body: Any = None) -> tuple[int, str]:
        """`method` `path` of the remote's admin API, with `body` as JSON (none for None) and its token:
        (status, answer's text); RemoteUnavailable when the request fails."""
        assert self._http is not None
        headers = {"Authorization": f"Bearer {cluster.token}"} if cluster.token else {}
        url = f"{service_url.rstrip('/')}{path}"
        try:
            async with self._http.request(method, url, json=body, headers=headers) as response:
                return response.status, await response.text()
        except (aiohttp.ClientError, TimeoutError) as error:
            raise RemoteUnavailable(f"cluster {cluster.name}: its admin API at {service_url} failed: {error}") from None

    async def _blocking(self, function: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, function, *args)


def _admin_url(remote: str, service_url: str, needed_for: str) -> str:
    """`service_url`, the remote's admin API as registered; RemoteUnavailable, saying it is `needed_for`, when
    the remote was registered without one."""
    if not service_url:
        raise RemoteUnavailable(f"cluster {remote} is registered without a serviceUrl, which {needed_for} needs")
    return service_url


def _partitions_path(topic: str) -> str:
    """The admin API's path of a topic's partitions (GET their count, PUT to create, POST to grow)."""
    return f"/admin/v2/persistent/{quote(topic)}/partitions"


def _token(cluster: str, data: dict[str, Any]) -> str | None:
    """The token the replicator presents to `cluster`, from its registration (read from its file each time
    the replicator connects, so a renewed token file is taken up)."""
    given = token_parameter(data)
    if given is None:
        return None
    kind, value = given
    if kind == "token":
        return value
    try:
        with open(value, encoding="utf-8") as file:
            return file.read().strip()
    except OSError as error:
        raise RemoteUnavailable(f"cluster {cluster}: cannot read the token file {value}: {error}") from None
