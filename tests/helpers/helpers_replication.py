"""Clusters for the replication tests: each a `seglog serve --cluster NAME` on free loopback ports with its own
data directory, registered with the others through the admin REST API, stopped by its pid."""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass
from pathlib import Path

from helpers_server import Server, pulsar, receive_until, rest, start_server

WAIT_S = 30.0  # the longest a test waits for replication to arrive


@dataclass
class Cluster:
    name: str
    data: Path
    server: Server
    options: tuple[str, ...] = ()  # more `seglog serve` options, given again on restart

    @property
    def ports(self) -> tuple[str, str]:
        return self.server.pulsar_url.rsplit(":", 1)[1], self.server.http_url.rsplit(":", 1)[1]

    def rest(self, method: str, path: str, body=None) -> tuple[int, object]:
        return rest(self.server.http_url, method, path, body)

    def ok(self, method: str, path: str, body=None) -> object:
        status, answer = self.rest(method, path, body)
        assert status in (200, 204), (self.name, method, path, status, answer)
        return answer

    def answer(self, path: str) -> object:
        """GET `path`: its JSON when 200, else the status."""
        status, answer = self.rest("GET", path)
        return answer if status == 200 else status

    def topics(self) -> list[str]:
        """The names of the cluster's topics."""
        return [topic["name"] for topic in self.ok("GET", "/seglog/v1/topics")]

    def client(self):
        return self.server.client()

    def kill(self) -> None:
        self.server.stop(signal.SIGKILL)

    def stop(self) -> None:
        self.server.stop()

    def restart(self) -> None:
        """Start again on the same data directory and ports (the others have them registered)."""
        port, http_port = self.ports
        self.server = start_server(self.data, "--cluster", self.name, "--port", port, "--http-port", http_port,
                                   *self.options)


def start_clusters(root: Path, *names: str, broker_conf: dict[str, str] | None = None) -> dict[str, Cluster]:
    """Clusters `names`, each registered with the others; `broker_conf`: a broker.conf's text by cluster."""
    clusters = {}
    try:
        for name in names:
            data = root / name
            if broker_conf and name in broker_conf:
                data.mkdir(parents=True)
                (data / "broker.conf").write_text(broker_conf[name])
            clusters[name] = Cluster(name, data, start_server(data, "--cluster", name))
    except BaseException:
        stop_clusters(clusters)
        raise
    for cluster in clusters.values():
        for other in clusters.values():
            if other is not cluster:
                cluster.ok("PUT", f"/admin/v2/clusters/{other.name}",
                           {"serviceUrl": other.server.http_url, "brokerServiceUrl": other.server.pulsar_url})
    return clusters


def start_shared_clusters(root: Path, store: str, *names: str) -> dict[str, Cluster]:
    """Clusters `names` sharing the configuration store `store` (etcd://...): each registers itself there, so
    every one knows the others without registering them."""
    clusters = {}
    try:
        for name in names:
            options = ("--configuration-store", store)
            clusters[name] = Cluster(name, root / name, start_server(root / name, "--cluster", name, *options),
                                     options)
    except BaseException:
        stop_clusters(clusters)
        raise
    return clusters


def start_synchronized_clusters(root: Path, topic: str, *names: str) -> dict[str, Cluster]:
    """Clusters `names` synchronizing their configuration through `topic` (--configuration-sync-topic),
    bootstrapped as docs/REPLICATION.md says: each registers the others, makes the topic's tenant and namespace
    with all of them as its clusters, and is restarted with the option."""
    clusters = start_clusters(root, *names)
    try:
        tenant, namespace, _ = topic.split("/")
        for cluster in clusters.values():
            cluster.ok("PUT", f"/admin/v2/tenants/{tenant}", {"allowedClusters": list(names)})
            cluster.ok("PUT", f"/admin/v2/namespaces/{tenant}/{namespace}", {"replication_clusters": list(names)})
        for cluster in clusters.values():
            cluster.stop()
            cluster.options = ("--configuration-sync-topic", topic)
            cluster.restart()
    except BaseException:
        stop_clusters(clusters)
        raise
    return clusters


def everywhere(clusters: dict[str, Cluster], path: str, expected) -> None:
    """Wait (bounded) until GET `path` answers `expected` on every cluster."""
    for cluster in clusters.values():
        wait_until(lambda cluster=cluster: cluster.answer(path) == expected)


def check_growth_travels(clusters: dict[str, Cluster]) -> None:
    """With a shared or synchronized configuration (clusters east, west and north, tenant acme made, its
    namespace acme/orders replicated among all three with a topic `events` of 3 partitions): a partitioned
    topic made on one cluster and grown on another has its partitions on all, and a non-partitioned one stays
    where it was made. A replicated topic grows everywhere while replicators read it (they make room), and
    messages to its new partitions reach every cluster."""
    clusters["east"].ok("PUT", "/admin/v2/namespaces/acme/plain")
    wait_until(lambda: "acme/plain" in clusters["north"].answer("/admin/v2/namespaces/acme"))  # (it travels)
    plain = "/admin/v2/persistent/acme/plain/metrics/partitions"
    clusters["north"].ok("PUT", plain, 2)
    everywhere(clusters, plain, {"partitions": 2})
    clusters["west"].ok("POST", plain, 5)
    everywhere(clusters, plain, {"partitions": 5})
    clusters["east"].ok("PUT", "/seglog/v1/topics/acme/plain/local", {"partitions": 1})
    assert "acme/plain/local" not in clusters["north"].topics()
    events = "/admin/v2/persistent/acme/orders/events/partitions"
    clusters["north"].ok("POST", events, 4)
    everywhere(clusters, events, {"partitions": 4})
    producer = clusters["east"].client().create_producer(
        "persistent://acme/orders/events", batching_enabled=False,
        message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
    for i in range(8):
        producer.send(b"grown%d" % i)
    producer.close()
    for name in ("west", "north"):
        consumer = clusters[name].client().subscribe("persistent://acme/orders/events", "s",
                                                     initial_position=pulsar.InitialPosition.Earliest)
        (got,) = receive_until([consumer], 8, seconds=WAIT_S)
        consumer.close()
        assert sorted(m.data() for m in got) == sorted(b"grown%d" % i for i in range(8)), name
        assert {m.topic_name().rsplit("-", 1)[1] for m in got} == {"0", "1", "2", "3"}


def stop_clusters(clusters: dict[str, Cluster]) -> None:
    """Stop every cluster still running (each by its pid), all of them even when one fails to stop cleanly;
    then the first such failure is raised."""
    failures = []
    for cluster in clusters.values():
        if cluster.server.process.poll() is None:
            try:
                cluster.stop()
            except AssertionError as failure:  # (Server.stop has killed it by then)
                failures.append(failure)
    if failures:
        raise failures[0]


def replicate_namespace(clusters: dict[str, Cluster], namespace: str, names: list[str], *, on: list[str]) -> None:
    """Set the namespace's clusters to `names` on each cluster of `on` (independent configuration stores)."""
    for name in on:
        cluster = clusters[name]
        cluster.ok("POST", f"/admin/v2/namespaces/{namespace}/allowedClusters", names)
        cluster.ok("POST", f"/admin/v2/namespaces/{namespace}/replication", names)


def read_all(cluster: Cluster, topic: str, *, expected: int, seconds: float = WAIT_S) -> list:
    """Every message of `topic` on `cluster`, read from the start once `expected` are there (or the time is up),
    plus anything that arrives within a short while after: so duplicates show."""
    reader = cluster.client().create_reader(topic, pulsar.MessageId.earliest)
    got = []
    deadline = time.monotonic() + seconds
    while len(got) < expected and time.monotonic() < deadline:
        try:
            got.append(reader.read_next(100))
        except pulsar.Timeout:
            continue
    settle = time.monotonic() + 0.5  # (a duplicate would follow what was sent at once, on the same connection)
    while time.monotonic() < settle:
        try:
            got.append(reader.read_next(100))
        except pulsar.Timeout:
            continue
    reader.close()
    return got


def wait_until(condition, seconds: float = WAIT_S) -> None:
    """Poll `condition` (bounded in time) until it holds; AssertionError if it never does."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {seconds} s")
        time.sleep(0.05)
