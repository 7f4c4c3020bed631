"""The shared configuration store: clusters that share one etcd see the same registered clusters, tenants,
namespaces (policies and permissions) and partitioned topics, as Pulsar's clusters sharing a configuration
metadata store do (docs/REPLICATION.md, "Configuration stores"; `seglog serve --configuration-store etcd://...`).

Each cluster's SQLite catalog stays the copy every read uses, so every check and transaction of the catalog
works as with independent stores. What connects it to etcd:

- Out: every change this cluster makes to a shared entity (catalog.metadata's SharedChange) is written to etcd
  inside the change's transaction, before it commits (Metadata.on_shared_change): a change etcd does not take
  is refused (ConfigurationStoreError, 503 on the REST API) and the catalog keeps what it had.
- In: a watch on the prefix applies every other cluster's change (shared_configuration.py: Metadata.apply_shared,
  or the broker's creation, growth or deletion of a partitioned topic, then the cascading deletions), then
  tells the catalog's listeners (policies_changed), so replicators start and stop at once. Events come in
  etcd's order; a key's event older than what this cluster last wrote or applied for it (the conflict rule:
  etcd's revisions, kept in memory) is skipped, so concurrent changes end, everywhere, as etcd's latest
  revision has them. A stream that ends (etcd restarted, the connection lost, or idle for
  WATCH_IDLE_S) is reopened from the next revision; one that etcd compacted past is replaced by a full resync.
- At start: the store's content wins for the entities it has. What only the catalog has is published when the
  data directory joins this store for the first time (the first cluster bootstraps it; the store's identity is
  the `store-id` key, recorded in the data directory), and deleted when it had joined it before: it was deleted
  in the store while this cluster was down.
- Cascading deletion: after any namespace change, this cluster deletes the topics its namespace's clusters or
  allowed clusters now leave it out of (shared_configuration.py), as Pulsar does with a shared store.

Topic data, cursors and topic policies never go to etcd. Keys: PREFIX + `clusters/NAME`, `tenants/NAME`,
`namespaces/TENANT/NS`, `partitioned-topics/TENANT/NS/TOPIC`, each a JSON value (SharedChange.value).

The synchronized store (config_sync.py, a replicated event topic) is the other transport of the same events."""

from __future__ import annotations

import base64
import json
import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from seglog.broker import Broker
from seglog.catalog.metadata import SHARED_KINDS, SharedChange
from seglog.errors import ConfigurationStoreError, InvalidArgumentError
from seglog.replication.shared_configuration import Incoming, SharedConfiguration, always_exists

if TYPE_CHECKING:
    from etcd3gw.client import Etcd3Client

logger = logging.getLogger("seglog.replication.config_store")

SCHEME = "etcd"
PREFIX = "/seglog/"
STORE_ID_KEY = PREFIX + "store-id"  # the store's identity: a data directory knows whether it joined this one
PATHS = {"cluster": "clusters/", "tenant": "tenants/", "namespace": "namespaces/", "topic": "partitioned-topics/"}
REQUEST_TIMEOUT_S = 5.0  # one etcd request; an unreachable etcd at start is an error after this, never a hang
WATCH_IDLE_S = 10.0  # a watch stream silent this long is reopened (a connection may die without a word)
RETRY_S = (0.1, 5.0)  # reopening a failed watch: first and longest pause
STOP_S = 10.0  # how long stopping waits for a change being applied

T = TypeVar("T")


def parse_etcd_url(url: str) -> list[tuple[str, int]]:
    """The endpoints of `etcd://HOST:PORT[,HOST:PORT...]` (InvalidArgumentError naming what is wrong)."""
    accepted = "etcd://HOST:PORT, or etcd://HOST1:PORT1,HOST2:PORT2 (an etcd's client URLs)"
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme != SCHEME or not parts.netloc:
        raise InvalidArgumentError("--configuration-store", url, accepted, detail="the scheme must be etcd://")
    if parts.path not in ("", "/") or parts.query or parts.fragment or "@" in parts.netloc:
        raise InvalidArgumentError("--configuration-store", url, accepted,
                                   detail="only hosts and ports, without a path, query or credentials")
    endpoints = []
    for endpoint in parts.netloc.split(","):
        host, _, port = endpoint.rpartition(":")
        host = host.removeprefix("[").removesuffix("]")  # an IPv6 address: [::1]:2379
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InvalidArgumentError("--configuration-store", url, accepted,
                                       detail=f"{endpoint!r} is not HOST:PORT with a port from 1 to 65535")
        endpoints.append((host, int(port)))
    return endpoints


def _path(kind: str, key: str) -> str:
    return PREFIX + PATHS[kind] + key


def _entity(path: str) -> tuple[str, str] | None:
    """(kind, key) of an entity's key in etcd; None for any other key under the prefix (the store's id)."""
    for kind, folder in PATHS.items():
        if path.startswith(PREFIX + folder):
            return kind, path[len(PREFIX + folder):]
    return None


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _unb64(text: str) -> str:
    return base64.b64decode(text).decode()


def _prefix_end(prefix: str) -> str:
    """The key after every key that starts with `prefix` (etcd's range_end for a prefix)."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


class _Etcd:
    """etcd's v3 JSON gateway at one of the URL's endpoints (the next one when one cannot be reached), through
    etcd3gw, one request at a time (etcd3gw's HTTP session is not meant for several threads at once)."""

    def __init__(self, url: str, endpoints: list[tuple[str, int]]) -> None:
        try:
            import etcd3gw
        except ImportError:
            raise ConfigurationStoreError(f"--configuration-store {url} needs the etcd client: pip install "
                                          "'seglog[etcd]'") from None
        self.url = url
        self._errors = etcd3gw.exceptions
        self._clients = [etcd3gw.Etcd3Client(host=host, port=port, timeout=REQUEST_TIMEOUT_S)
                         for host, port in endpoints]
        self._current = 0
        self._lock = threading.Lock()

    def _call(self, operation: Callable[[Etcd3Client], T]) -> T:
        """`operation` on the current endpoint, else on each next one; ConfigurationStoreError naming the URL and
        why when none answers (a request of the HTTP client that fails, OSError, is an unreachable endpoint)."""
        failures = []
        with self._lock:
            for _ in self._clients:
                client = self._clients[self._current]
                try:
                    return operation(client)
                except (self._errors.ConnectionFailedError, self._errors.ConnectionTimeoutError, OSError) as error:
                    failures.append(f"{client.host}:{client.port}: {error}")
                    self._current = (self._current + 1) % len(self._clients)
                except self._errors.Etcd3Exception as error:
                    raise ConfigurationStoreError(f"the configuration store {self.url} refused a request: "
                                                  f"{error}") from None
        raise ConfigurationStoreError(f"the configuration store {self.url} cannot be reached "
                                      f"({'; '.join(failures)})")

    def _txn(self, requests: list[dict[str, Any]]) -> dict[str, Any]:
        return self._call(lambda client: dict(client.transaction({"compare": [], "success": requests,
                                                                   "failure": []})))

    def range_prefix(self, prefix: str) -> tuple[int, dict[str, tuple[str, int]]]:
        """(the store's revision, {key: (value, its revision)} for every key under `prefix`) at that revision."""
        answer = self._txn([{"request_range": {"key": _b64(prefix), "range_end": _b64(_prefix_end(prefix))}}])
        kvs = answer["responses"][0]["response_range"].get("kvs", [])
        return int(answer["header"]["revision"]), {
            _unb64(kv["key"]): (_unb64(kv.get("value", "")), int(kv["mod_revision"])) for kv in kvs}

    def put(self, key: str, value: str) -> int:
        """Write `key`; the revision the write made."""
        return int(self._txn([{"request_put": {"key": _b64(key), "value": _b64(value)}}])["header"]["revision"])

    def delete(self, key: str) -> int:
        """Delete `key` (nothing when absent); the store's revision after it."""
        return int(self._txn([{"request_delete_range": {"key": _b64(key)}}])["header"]["revision"])

    def create(self, key: str, value: str) -> str:
        """Write `key` if it is absent; its value, as written now or before."""
        self._call(lambda client: client.create(key, value))
        return self.range_prefix(key)[1][key][0]

    def watch(self, prefix: str, start_revision: int) -> Iterator[dict[str, Any]]:
        """Each response of a watch of the keys under `prefix` from `start_revision` on; it ends with an error
        when the stream does (idle WATCH_IDLE_S included). etcd3gw's own watch helper cannot be used: its thread
        drops a broken stream without a word (its iterator then waits forever), so the stream is read here,
        with the client's own session and URL."""
        request: dict[str, dict[str, str | int]] = {
            "create_request": {"key": _b64(prefix), "range_end": _b64(_prefix_end(prefix)),
                               "start_revision": start_revision}}
        response = self._call(lambda client: client.session.post(client.get_url("/watch"), json=request,
                                                                  stream=True,
                                                                  timeout=(REQUEST_TIMEOUT_S, WATCH_IDLE_S)))
        with response:
            if response.status_code != 200:
                raise ConfigurationStoreError(f"the configuration store {self.url} refused a watch: "
                                              f"{response.status_code} {response.text}")
            for line in response.iter_lines():
                if line.strip():
                    answer = json.loads(line)
                    if "error" in answer:
                        raise ConfigurationStoreError(f"the configuration store {self.url} ended a watch: "
                                                      f"{answer['error']}")
                    yield answer["result"]


class _Compacted(Exception):
    """etcd no longer has the revisions a watch asked for: only a full resync catches up."""


class EtcdConfigurationStore:
    """This cluster's catalog mirrored with the etcd at `url` (the module's docstring). `start` (blocking)
    syncs and begins following the store; ConfigurationStoreError naming the URL when etcd cannot be reached."""

    def __init__(self, broker: Broker, local: str, url: str, grow: Callable[[str, int], None] | None = None) -> None:
        endpoints = parse_etcd_url(url)
        self.url = url
        self.broker = broker
        self.shared = SharedConfiguration(broker, local, grow)  # (`grow`: as SharedConfiguration's)
        self._writer = _Etcd(url, endpoints)  # used by the threads that make changes, one at a time (in a
        self._reader = _Etcd(url, endpoints)  # transaction) and by the thread that follows the store
        self._revision = 0  # the store's newest revision applied here
        self._revisions: dict[str, int] = {}  # by key: the newest revision written or applied here
        self._revisions_lock = threading.Lock()  # (never held while calling the catalog)
        self._applying = threading.Lock()  # held while a batch of changes is applied; stop() waits for it
        self._stopped = threading.Event()

    def start(self) -> None:
        identity = self._writer.create(STORE_ID_KEY, uuid.uuid4().hex)
        revision, entries = self._writer.range_prefix(PREFIX)
        metadata = self.broker.catalog.metadata
        joined = metadata.joined_store() == identity
        self._sync(revision, entries, publish_local=not joined)
        metadata.on_shared_change(self._publish)
        metadata.record_joined_store(identity)
        self.broker.catalog.share_configuration(self.url)
        logger.info("configuration store %s (%s): in sync at revision %d", self.url, identity, revision)
        threading.Thread(target=self._follow, name="seglog-configuration-store", daemon=True).start()

    def stop(self) -> None:
        """Stop applying the store's changes (a change being applied finishes first, STOP_S at most). The
        following thread ends at its next read; changes made here from now on are refused."""
        self._stopped.set()
        if self._applying.acquire(timeout=STOP_S):
            self._applying.release()

    def _publish(self, change: SharedChange) -> None:
        """Metadata.on_shared_change: write the change to etcd before it commits here (ConfigurationStoreError
        refuses it)."""
        if self._stopped.is_set():
            raise ConfigurationStoreError(f"the configuration store {self.url} is no longer followed (the server "
                                          "is stopping)")
        path = _path(change.kind, change.key)
        if change.value is None:
            revision = self._writer.delete(path)
        else:
            revision = self._writer.put(path, json.dumps(change.value, sort_keys=True))
        self._record(path, revision)

    def _sync(self, revision: int, entries: dict[str, tuple[str, int]], *, publish_local: bool) -> None:
        """Make the catalog what the store has at `revision` (creations and updates in SHARED_KINDS order,
        deletions in the reverse order); what only the catalog has is published with `publish_local`, else
        deleted (but `public` and `public/default`, which every data directory has, are published)."""
        metadata = self.broker.catalog.metadata
        stored: dict[tuple[str, str], SharedChange] = {}
        for path, (value, _) in entries.items():
            entity = _entity(path)
            if entity is not None:
                stored[entity] = SharedChange(*entity, json.loads(value))
        local_only = [change for change in metadata.shared_entities() if (change.kind, change.key) not in stored]
        deleted = []
        for change in local_only:
            if publish_local or always_exists(change):
                self._publish(change)
            else:
                deleted.append(SharedChange(change.kind, change.key, None))
        rank = SHARED_KINDS.index
        with self._applying:
            for change in sorted(stored.values(), key=lambda c: rank(c.kind)) + \
                    sorted(deleted, key=lambda c: -rank(c.kind)):
                self.shared.apply_logged(change)
            for path, (_, key_revision) in entries.items():
                self._record(path, key_revision)
            self._revision = max(self._revision, revision)
            self.shared.cascade(metadata.namespaces())
        self.broker.catalog.policies_changed()

    def _newer(self, path: str, revision: int) -> bool:
        """Whether `revision` of `path` is newer than any written or applied here."""
        with self._revisions_lock:
            return revision > self._revisions.get(path, 0)

    def _record(self, path: str, revision: int) -> None:
        """`revision` of `path` was written or applied here (the newest of them is kept)."""
        with self._revisions_lock:
            self._revisions[path] = max(self._revisions.get(path, 0), revision)

    def _follow(self) -> None:
        """The thread that applies the store's changes until stop()."""
        pause = RETRY_S[0]
        while not self._stopped.is_set():
            try:
                for result in self._reader.watch(PREFIX, self._revision + 1):
                    if result.get("canceled"):
                        raise _Compacted(result.get("compact_revision"))
                    if result.get("events"):
                        self._apply_events(result["events"])
                    pause = RETRY_S[0]
            except _Compacted as compacted:
                logger.info("configuration store %s compacted past revision %d (%s): resyncing", self.url,
                            self._revision, compacted)
                self._resync()
            except ConfigurationStoreError as error:
                logger.warning("configuration store: %s; retrying in %.1f s", error, pause)
                self._stopped.wait(pause)
                pause = min(pause * 2, RETRY_S[1])
            except Exception as error:  # (the stream ended: idle, etcd restarted, the connection lost)
                logger.debug("configuration store %s: the watch ended (%s); reopening", self.url, error)
                self._stopped.wait(pause)
                pause = min(pause * 2, RETRY_S[1])  # (back to the first once a stream answers again)

    def _resync(self) -> None:
        try:
            revision, entries = self._reader.range_prefix(PREFIX)
        except ConfigurationStoreError as error:
            logger.warning("configuration store: %s; resyncing later", error)
            return
        if not self._stopped.is_set():
            self._sync(revision, entries, publish_local=False)

    def _apply_events(self, events: list[dict[str, Any]]) -> None:
        """One watch response's events (one revision or more, in order), each applied when its revision is
        newer than what this cluster wrote or applied for its key (SharedConfiguration.apply_incoming)."""
        with self._applying:
            if self._stopped.is_set():
                return
            incoming = []
            for event in events:
                kv = event["kv"]
                path, revision = _unb64(kv["key"]), int(kv["mod_revision"])
                self._revision = max(self._revision, revision)
                entity = _entity(path)
                if entity is None:
                    continue
                value = None if event.get("type") == "DELETE" else json.loads(_unb64(kv.get("value", "")))
                incoming.append(Incoming(SharedChange(*entity, value), partial(self._newer, path, revision),
                                         partial(self._record, path, revision)))
            self.shared.apply_incoming(incoming)
