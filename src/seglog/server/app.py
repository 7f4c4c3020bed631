"""`seglog serve`: the binary protocol and the admin HTTP port on one asyncio loop, over one Broker.

The server holds its data directory with a lock file (`serve.lock`, the server's pid in it), so a second
server on the same directory is refused; each partition it writes is held by its writer lock, as in-process.
SIGTERM or SIGINT: stop accepting, answer the commands already received (every SEND is written and
receipted), close the connections, then close the broker (writers flushed and closed), and exit 0.
With authentication providers (token, basic, tls), clients are authenticated and authorized per role (auth.py).
With a certificate and key, TLS listens on --tls-port and --https-port beside the plain ports, as Pulsar's
brokerServicePortTls and webServicePortTls; given neither, the two main ports serve TLS only (pulsar+ssl://
and https://). With trusted CAs, a client certificate is verified when the client presents one.
The Flight port (server/flight/) streams ranges of partitions as Arrow; it serves TLS with the certificate."""

from __future__ import annotations

import asyncio
import faulthandler
import io
import ipaddress
import logging
import os
import signal
import ssl
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web

from seglog.admin.api import Admin
from seglog.broker import METADATA_FILE, Broker
from seglog.clock import system_clock
from seglog.errors import InvalidArgumentError, ServerRunningError
from seglog.names import validate_part
from seglog.server.auth import AuthConfig, Authority, read_secret_key
from seglog.server.connection import INBOX_LIMIT, Connection
from seglog.server.flight import DEFAULT_PORT as FLIGHT_PORT
from seglog.server.flight import FlightPort, FlightTls
from seglog.server.flight.writes import FlightWrites
from seglog.server.htpasswd import Htpasswd
from seglog.server.inbound import InboundProtocol, Inbox
from seglog.server.protocol.batches import UnpackLimits
from seglog.server.protocol.frames import MAX_FRAME_SIZE
from seglog.server.rest import RestContext, make_app
from seglog.server.service import BrokerService, Settings
from seglog.storage.data_directory import make_data_directory
from seglog.storage.lock import ExclusiveFileLock

logger = logging.getLogger("seglog.server")

LOCK_FILE = "serve.lock"
WRITE_THREADS = 4
HTTP_SHUTDOWN_S = 5.0  # how long a stopping server lets HTTP requests in flight finish
FLIGHT_SHUTDOWN_S = 5.0  # how long a stopping server waits for the Flight port's streams to end
SHUTDOWN_TIMEOUT_S = 15.0  # how long stopping may wait for connections and replication before closing anyway


class Extension(Protocol):
    """A service that runs in `seglog serve` beside the broker, on its loop: geo-replication
    (seglog.replication), which sits above the server and is given to it by the CLI."""

    def start(self) -> None: ...

    async def stop(self) -> None: ...

    def replication_stats(self, topic: str, partition: int | None) -> dict[str, dict[str, Any]]:
        """Per remote cluster, the outbound replication of a seglog topic's partition (or of all of them), as
        Pulsar's ReplicatorStats keys (rest/stats.py adds the inbound half and the backlog)."""

    def replicated_subscriptions_stats(self) -> dict[str, int]:
        """Replicated subscriptions' snapshot attempts: pendingSnapshots, timedoutSnapshots, completedSnapshots
        and completedSnapshotsMs (their time, summed), as counts."""

    def subscription_snapshots(self, topic: str, partition: int) -> dict[str, list[dict[str, Any]]]:
        """Per replicated subscription of a seglog topic's partition, the snapshots it has not passed yet:
        [{'snapshotId', 'position', 'clusters': {remote: offset}}], oldest first."""

    def marker_received(self, topic: str, partition: int, origin: str, marker_type: int, payload: bytes,
                        position: int) -> None:
        """A marker cluster `origin`'s replicator sent to a partition of a seglog topic, arrived when the
        partition ended at `position` (called in the server's thread pool)."""

    async def grow_topic(self, topic: str, partitions: int, local_only: bool) -> None:
        """Give a partitioned seglog topic more partitions, for the admin API: the extension's own users of
        it make room (replicators), and unless `local_only` (Pulsar's updateLocalTopicOnly) the clusters it
        replicates to grow theirs too. Refusals as Broker.update_partitions, or RestError."""

    def appended(self, topic: str, partition: int, first: int, count: int, origin: str | None) -> None:
        """A server producer appended `count` messages at offset `first` of a partition of a seglog topic:
        produced here (`origin` None), or replicated from cluster `origin` (called in the server's thread pool,
        after each append)."""


# (the broker, this cluster's name, the server's thread pool) -> the extension
ExtensionFactory = Callable[[Broker, str, Executor], Extension]


@dataclass
class ServeOptions:
    """What `seglog serve` is told: cli/serve.py's options, checked by `serve` before it opens anything."""

    data: Path
    cluster: str
    host: str = "127.0.0.1"
    port: int = 6650
    http_port: int = 8080
    advertised_address: str | None = None
    allow_unauthenticated: bool = False
    keepalive_s: float = 30.0
    max_message_size: int = MAX_FRAME_SIZE
    auth_secret_key: Path | None = None  # token authentication when given (the key's raw bytes)
    auth_basic_file: Path | None = None  # basic authentication against this htpasswd file when given
    auth_tls: bool = False  # TLS client certificate authentication (needs tls_trust_certs_file)
    superuser_roles: tuple[str, ...] = ()
    anonymous_role: str | None = None  # the role of clients without credentials; None: refused
    tls_cert_file: Path | None = None  # both given: TLS on the TLS ports, or on both main ports without them
    tls_key_file: Path | None = None
    tls_port: int | None = None  # binary protocol over TLS beside `port` (0: a free port)
    https_port: int | None = None  # admin REST and HTTP lookup over TLS beside `http_port` (0: a free port)
    flight_port: int = FLIGHT_PORT  # Arrow Flight (0: a free port); TLS with the certificate
    tls_trust_certs_file: Path | None = None  # CAs that sign clients' certificates, verified when presented
    tls_require_trusted_client_cert: bool = False  # TLS clients without a trusted certificate are refused
    max_messages_per_batch: int = UnpackLimits.max_messages
    max_unacked_messages_per_consumer: int = Settings.max_unacked_messages_per_consumer  # 0: no bound
    precise_dispatcher_flow_control: bool = Settings.precise_dispatcher_flow_control
    max_publish_buffer: int = Settings.max_publish_buffer  # bytes of SENDs not yet written, in all
    max_connection_publish_buffer: int = Settings.max_connection_publish_buffer  # the same, per connection

    @property
    def tls_beside(self) -> bool:
        """TLS on ports of its own beside the plain ones (else, with a certificate, on the main ports)."""
        return self.tls_port is not None or self.https_port is not None

    @property
    def authenticating(self) -> bool:
        """Whether any authentication provider is on."""
        return self.auth_secret_key is not None or self.auth_basic_file is not None or self.auth_tls


PROVIDER_OPTIONS = "--auth-token-secret-key, --auth-basic-file or --auth-tls"


def check_host(options: ServeOptions) -> None:
    """Only loopback without authentication, unless told otherwise."""
    if options.host == "localhost" or options.authenticating:
        return
    try:
        loopback = ipaddress.ip_address(options.host).is_loopback
    except ValueError:
        loopback = False
    if not loopback and not options.allow_unauthenticated:
        raise InvalidArgumentError("host", options.host, f"a loopback address (127.0.0.1); another with an "
                                   f"authentication provider ({PROVIDER_OPTIONS}: clients then need "
                                   "credentials), or with --allow-unauthenticated (anyone who reaches it may do "
                                   "anything)")


def auth_config(options: ServeOptions) -> AuthConfig:
    """The security settings of the options, checked (the key and htpasswd files read) before anything is
    opened."""
    if not options.authenticating:
        for argument, given in (("superuser roles", options.superuser_roles),
                                ("anonymous role", options.anonymous_role)):
            if given:
                raise InvalidArgumentError(argument, given, f"roles only with an authentication provider "
                                           f"({PROVIDER_OPTIONS}): without one, anyone may do anything")
        return AuthConfig()
    if options.auth_tls and options.tls_trust_certs_file is None:
        raise InvalidArgumentError("--auth-tls", True, "with --tls-trust-certs-file: the CAs whose client "
                                   "certificates authenticate (Pulsar's tlsTrustCertsFilePath)")
    return AuthConfig(
        None if options.auth_secret_key is None else read_secret_key(options.auth_secret_key, argument="secret key"),
        frozenset(options.superuser_roles), options.anonymous_role,
        None if options.auth_basic_file is None else Htpasswd.read(options.auth_basic_file,
                                                                   argument="--auth-basic-file"),
        options.auth_tls)


def tls_context(options: ServeOptions) -> ssl.SSLContext | None:
    """The server's TLS context when a certificate and key are given; it asks clients for a certificate when
    CAs to trust are given (verified if presented, required with --tls-require-trusted-client-cert)."""
    _check_tls_options(options)
    if options.tls_cert_file is None or options.tls_key_file is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(options.tls_cert_file, options.tls_key_file)
    except (OSError, ssl.SSLError) as error:
        raise InvalidArgumentError("--tls-cert-file / --tls-key-file",
                                   f"{options.tls_cert_file}, {options.tls_key_file}",
                                   "a PEM certificate (chain) and its PEM private key, readable",
                                   detail=getattr(error, "strerror", None) or str(error)) from None
    if options.tls_trust_certs_file is not None:
        try:
            context.load_verify_locations(cafile=options.tls_trust_certs_file)
        except (OSError, ssl.SSLError) as error:
            raise InvalidArgumentError("--tls-trust-certs-file", str(options.tls_trust_certs_file),
                                       "a readable PEM file of the CA certificates that sign clients' certificates",
                                       detail=getattr(error, "strerror", None) or str(error)) from None
        # CERT_OPTIONAL, as Pulsar without tlsRequireTrustedClientCertOnConnect: a certificate the CAs do not
        # sign fails the handshake, and clients that present none (token, basic, anonymous) still connect
        context.verify_mode = ssl.CERT_REQUIRED if options.tls_require_trusted_client_cert else ssl.CERT_OPTIONAL
    return context


def _check_tls_options(options: ServeOptions) -> None:
    """Refuse TLS options that need others not given, or ports given twice."""
    if (options.tls_cert_file is None) != (options.tls_key_file is None):
        missing, given_file = (("--tls-cert-file", options.tls_key_file) if options.tls_cert_file is None
                               else ("--tls-key-file", options.tls_cert_file))
        raise InvalidArgumentError(missing, None, "a PEM file, given with the other one: TLS needs both the "
                                   f"certificate and its private key (only {given_file} was given)")
    needs_certificate = [(option, given) for option, given in (
        ("--tls-port", options.tls_port), ("--https-port", options.https_port),
        ("--tls-trust-certs-file", options.tls_trust_certs_file)) if given is not None]
    if needs_certificate and options.tls_cert_file is None:
        option, given = needs_certificate[0]
        raise InvalidArgumentError(option, given, "with --tls-cert-file and --tls-key-file, the server's "
                                   "certificate and key, which TLS needs")
    if options.tls_require_trusted_client_cert and options.tls_trust_certs_file is None:
        raise InvalidArgumentError("--tls-require-trusted-client-cert", True, "with --tls-trust-certs-file: the "
                                   "CAs that sign the certificates required")
    ports = [("--port", options.port), ("--http-port", options.http_port), ("--tls-port", options.tls_port),
             ("--https-port", options.https_port), ("--flight-port", options.flight_port)]
    for index, (option, port) in enumerate(ports):
        for other, other_port in ports[:index]:
            if port and port == other_port:
                raise InvalidArgumentError(option, port, f"a port of its own: {other} is {port} too (0 picks a "
                                           "free port)")


def lock_data_directory(data: Path) -> ExclusiveFileLock:
    make_data_directory(data, METADATA_FILE)

    def busy(path: str, pid: int | None) -> Exception:
        holder = f"process {pid}" if pid else "another process"
        return ServerRunningError(f"{holder} serves the data directory {data} already (it holds {path}); stop "
                                  "it first, or give this server another --data")

    return ExclusiveFileLock(data / LOCK_FILE, busy)


async def serve(options: ServeOptions, ready: Callable[[tuple[str, ...]], None],
                extension: ExtensionFactory | None = None) -> bool:
    """Serve until SIGTERM or SIGINT; `ready(urls)` once every port listens: one URL a port, in the order
    --port, --http-port, --tls-port, --https-port, --flight-port (`pulsar://HOST:PORT`, `http://...`,
    `pulsar+ssl://...`, `https://...`, `grpc://...`; the first two `pulsar+ssl://` and `https://` when TLS has
    no ports of its own, the last `grpc+tls://` with a certificate).
    `extension` runs beside the broker from then until the server stops. Whether every thread the server
    started has ended (False: a Flight call whose client holds it unread outlasted the stop's bound; pyarrow
    cannot cancel it, so the process must end without waiting for it: cli/serve.py)."""
    check_host(options)
    validate_part(options.cluster, kind="cluster name")  # registered in the catalog (GET /admin/v2/clusters)
    security = auth_config(options), tls_context(options)
    lock = lock_data_directory(options.data)
    executor = ThreadPoolExecutor(WRITE_THREADS, thread_name_prefix="seglog-serve")
    loop = asyncio.get_running_loop()
    try:
        broker = await loop.run_in_executor(executor, lambda: Broker.open(options.data, clock=system_clock,
                                                                          background=True))
        try:  # refused before any port listens when the data directory is another cluster
            await loop.run_in_executor(executor, broker.catalog.check_local_cluster, options.cluster)
            return await _serve(options, broker, executor, ready, extension, *security)
        finally:
            await loop.run_in_executor(executor, broker.close)
    finally:
        executor.shutdown(wait=True)
        lock.release()


async def _serve(options: ServeOptions, broker: Broker, executor: ThreadPoolExecutor,
                 ready: Callable[[tuple[str, ...]], None], extension: ExtensionFactory | None, auth: AuthConfig,
                 tls: ssl.SSLContext | None) -> bool:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    connections: set[Connection] = set()
    tasks: set[asyncio.Task[None]] = set()
    settings = Settings(options.cluster, "", options.max_message_size,
                        max_messages_per_batch=options.max_messages_per_batch,
                        max_unacked_messages_per_consumer=options.max_unacked_messages_per_consumer,
                        precise_dispatcher_flow_control=options.precise_dispatcher_flow_control,
                        max_publish_buffer=options.max_publish_buffer,
                        max_connection_publish_buffer=options.max_connection_publish_buffer)
    service = BrokerService(broker, settings)
    authority = Authority(auth, Admin(broker), broker.clock)

    async def on_connection(reader: Inbox, writer: asyncio.StreamWriter) -> None:
        connection = Connection(service, reader, writer, executor, keepalive_s=options.keepalive_s,
                                authority=authority)
        connections.add(connection)
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        try:
            await connection.serve()
        except Exception:  # (one connection's failure never takes the server down)
            logger.exception("connection %s failed", connection.peer)
        finally:
            connections.discard(connection)
            tasks.discard(task)

    binaries: list[asyncio.Server] = []
    running: Extension | None = None
    flight: FlightPort | None = None
    flight_stopped = True

    async def listen_binary(option: str, port: int, context: ssl.SSLContext | None) -> int:
        with _binding(option, options.host, port):
            server = await asyncio.get_running_loop().create_server(
                lambda: InboundProtocol(on_connection, INBOX_LIMIT), options.host, port, ssl=context)
        binaries.append(server)
        return int(server.sockets[0].getsockname()[1])

    rest = RestContext(broker, Admin(broker), service, executor, authority=authority)
    http = web.AppRunner(make_app(rest), access_log=None, handle_signals=False,
                          shutdown_timeout=HTTP_SHUTDOWN_S)
    await http.setup()
    advertised = options.advertised_address or options.host
    main_tls = None if options.tls_beside else tls  # without TLS ports of its own, TLS takes the main ports
    try:
        if extension is not None:  # before any port listens: a shared configuration store syncs the catalog
            running = extension(broker, options.cluster, executor)
            running.start()
            rest.replication_stats = running.replication_stats
            rest.replicated_subscriptions_stats = running.replicated_subscriptions_stats
            rest.subscription_snapshots = running.subscription_snapshots
            rest.grow_topic = running.grow_topic
            service.on_marker = running.marker_received
            service.on_append = running.appended
        port = await listen_binary("--port", options.port, main_tls)
        broker_url = f"{'pulsar+ssl' if main_tls else 'pulsar'}://{advertised}:{port}"
        port = await _listen_http(http, options, "--http-port", options.http_port, main_tls)
        http_url = f"{'https' if main_tls else 'http'}://{advertised}:{port}"
        listening = [broker_url, http_url]
        # LOOKUP's and the HTTP lookup's TLS URLs: the main ports' when they serve TLS only
        broker_url_tls, http_url_tls = (broker_url, http_url) if main_tls else ("", "")
        if options.tls_port is not None:
            tls_port = await listen_binary("--tls-port", options.tls_port, tls)
            broker_url_tls = f"pulsar+ssl://{advertised}:{tls_port}"
            listening.append(broker_url_tls)
        if options.https_port is not None:
            https_port = await _listen_http(http, options, "--https-port", options.https_port, tls)
            http_url_tls = f"https://{advertised}:{https_port}"
            listening.append(http_url_tls)
        flight = await loop.run_in_executor(executor, _listen_flight, service, authority, options)
        listening.append(f"{'grpc+tls' if flight.tls else 'grpc'}://{advertised}:{flight.port}")
        rest.flight_port, rest.flight_tls = flight.port, flight.tls
        settings.broker_url, settings.broker_url_tls = broker_url, broker_url_tls
        rest.http_url, rest.http_url_tls = http_url, http_url_tls
        registered = {"serviceUrl": "" if main_tls else http_url, "serviceUrlTls": http_url_tls,
                      "brokerServiceUrl": "" if main_tls else broker_url, "brokerServiceUrlTls": broker_url_tls}
        urls = {key: url for key, url in registered.items() if url}
        await loop.run_in_executor(executor, _record_cluster, broker, options.cluster, urls)
        ready(tuple(listening))
        await stop.wait()
        logger.info("stopping: no new connections; answering what was received")
    finally:
        for server in binaries:
            server.close()

        async def wind_down() -> None:
            nonlocal flight_stopped
            if flight is not None:
                flight_stopped = await loop.run_in_executor(executor, flight.stop, FLIGHT_SHUTDOWN_S)
            if running is not None:
                await running.stop()
            await http.cleanup()
            for connection in list(connections):
                connection.stop_reading()
            if tasks:
                await asyncio.wait(list(tasks))

        try:
            await asyncio.wait_for(wind_down(), SHUTDOWN_TIMEOUT_S)
        except TimeoutError:
            # (Pulsar's brokerShutdownTimeoutMs: the broker closes anyway, so every cursor is persisted; what
            # was still waiting is logged, threads and tasks, so that the cause can be found)
            logger.error("stopping took more than %.0f s; closing anyway. Still waiting: %s", SHUTDOWN_TIMEOUT_S,
                         _pending_tasks())
            faulthandler.dump_traceback(all_threads=True)
        await loop.run_in_executor(executor, service.deduplication.close)
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
    return flight_stopped


def _pending_tasks() -> str:
    """Every asyncio task not done yet, with where it waits."""
    out = io.StringIO()
    for task in asyncio.all_tasks():
        if task is not asyncio.current_task() and not task.done():
            task.print_stack(file=out)
    return out.getvalue()


def _listen_flight(service: BrokerService, authority: Authority, options: ServeOptions) -> FlightPort:
    """The Flight port on --flight-port, reads and writes, TLS with the server's certificate when it has one."""
    tls = None if options.tls_cert_file is None or options.tls_key_file is None else FlightTls(
        options.tls_cert_file, options.tls_key_file, options.tls_trust_certs_file,
        options.tls_require_trusted_client_cert)
    with _binding("--flight-port", options.host, options.flight_port):
        return FlightPort(service.broker, authority, options.host, options.flight_port, tls,
                          writes=FlightWrites(service, authority))


async def _listen_http(runner: web.AppRunner, options: ServeOptions, option: str, port: int,
                       context: ssl.SSLContext | None) -> int:
    """Serve the HTTP app on `port` (given as `option`) too (https with `context`); the port it listens on
    (`port` 0: a free one)."""
    before = len(runner.addresses)  # the addresses of every site started, in order
    with _binding(option, options.host, port):
        await web.TCPSite(runner, options.host, port, ssl_context=context).start()
    return int(runner.addresses[before][1])


@contextmanager
def _binding(option: str, host: str, port: int) -> Iterator[None]:
    """Listening on `port` (given as `option`) inside; a port that cannot be bound (in use, not permitted) is
    InvalidArgumentError naming the option and why."""
    try:
        yield
    except OSError as error:
        why = os.strerror(error.errno) if error.errno else str(error)
        raise InvalidArgumentError(option, port, "a port free on this host (0 picks a free one)",
                                   detail=f"{host}:{port}: {why}") from None


def _record_cluster(broker: Broker, cluster: str, urls: dict[str, str]) -> None:
    """Once every port listens: the data directory becomes cluster `cluster` (a start that failed before
    records nothing, so a start with another name is not refused after it), registered with the URLs it
    serves."""
    broker.catalog.record_local_cluster(cluster)
    Admin(broker).clusters.create(cluster, urls, exist_ok=True)


def run(options: ServeOptions, ready: Callable[[tuple[str, ...]], None],
        extension: ExtensionFactory | None = None) -> bool:
    """serve() until it stops; whether every thread it started has ended."""
    return asyncio.run(serve(options, ready, extension))
