"""`seglog serve`: the binary protocol and the admin HTTP port on one asyncio loop, over one Broker.

The server holds its data directory with a lock file (`serve.lock`, the server's pid in it), so a second
server on the same directory is refused; each partition it writes is held by its writer lock, as in-process.
SIGTERM or SIGINT: stop accepting, answer the commands already received (every SEND is written and
receipted), close the connections, then close the broker (writers flushed and closed), and exit 0.
With a secret key, clients authenticate with tokens and are authorized per role (auth.py); with a
certificate and key, both ports serve TLS only (pulsar+ssl:// and https://)."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import signal
import ssl
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web

from seglog.admin.api import Admin
from seglog.broker import Broker
from seglog.clock import system_clock
from seglog.errors import InvalidArgumentError, ServerRunningError
from seglog.names import validate_part
from seglog.server.auth import AuthConfig, Authority, read_secret_key
from seglog.server.connection import Connection
from seglog.server.protocol.frames import MAX_FRAME_SIZE
from seglog.server.rest import RestContext, make_app
from seglog.server.service import BrokerService, Settings
from seglog.storage.lock import WriterLock

logger = logging.getLogger("seglog.server")

LOCK_FILE = "serve.lock"
WRITE_THREADS = 4
HTTP_SHUTDOWN_S = 5.0  # how long a stopping server lets HTTP requests in flight finish


class Extension(Protocol):
    """A service that runs in `seglog serve` beside the broker, on its loop: geo-replication
    (seglog.replication), which sits above the server and is given to it by the CLI."""

    def start(self) -> None: ...

    async def stop(self) -> None: ...

    def replication_stats(self, topic: str, partition: int | None) -> dict[str, dict[str, Any]]:
        """Per remote cluster, the outbound replication of a seglog topic's partition (or of all of them), as
        Pulsar's ReplicatorStats keys (rest/stats.py adds the inbound half and the backlog)."""


# (the broker, this cluster's name, the server's thread pool) -> the extension
ExtensionFactory = Callable[[Broker, str, Executor], Extension]


@dataclass
class ServeOptions:
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
    superuser_roles: tuple[str, ...] = ()
    anonymous_role: str | None = None  # the role of clients without credentials; None: refused
    tls_cert_file: Path | None = None  # both given: TLS on both ports
    tls_key_file: Path | None = None


def check_host(options: ServeOptions) -> None:
    """Only loopback without authentication, unless told otherwise."""
    if options.host == "localhost" or options.auth_secret_key is not None:
        return
    try:
        loopback = ipaddress.ip_address(options.host).is_loopback
    except ValueError:
        loopback = False
    if not loopback and not options.allow_unauthenticated:
        raise InvalidArgumentError("host", options.host, "a loopback address (127.0.0.1); another with "
                                   "--auth-token-secret-key (clients then need a token), or with "
                                   "--allow-unauthenticated (anyone who reaches it may do anything)")


def auth_config(options: ServeOptions) -> AuthConfig:
    """The security settings of the options, checked (the key file read) before anything is opened."""
    if options.auth_secret_key is None:
        for argument, given in (("superuser roles", options.superuser_roles),
                                ("anonymous role", options.anonymous_role)):
            if given:
                raise InvalidArgumentError(argument, given, "roles only with --auth-token-secret-key: without it "
                                           "there is no authentication, and anyone may do anything")
        return AuthConfig()
    return AuthConfig(read_secret_key(options.auth_secret_key, argument="secret key"),
                      frozenset(options.superuser_roles), options.anonymous_role)


def tls_context(options: ServeOptions) -> ssl.SSLContext | None:
    """The server's TLS context when a certificate and key are given (no client certificates asked for)."""
    if options.tls_cert_file is None and options.tls_key_file is None:
        return None
    if options.tls_cert_file is None or options.tls_key_file is None:
        missing, given = (("--tls-cert-file", options.tls_key_file) if options.tls_cert_file is None
                          else ("--tls-key-file", options.tls_cert_file))
        raise InvalidArgumentError(missing, None, "a PEM file, given with the other one: TLS needs both the "
                                   f"certificate and its private key (only {given} was given)")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(options.tls_cert_file, options.tls_key_file)
    except (OSError, ssl.SSLError) as error:
        raise InvalidArgumentError("--tls-cert-file / --tls-key-file",
                                   f"{options.tls_cert_file}, {options.tls_key_file}",
                                   "a PEM certificate (chain) and its PEM private key, readable",
                                   detail=getattr(error, "strerror", None) or str(error)) from None
    return context


def lock_data_directory(data: Path) -> WriterLock:
    data.mkdir(parents=True, exist_ok=True)

    def busy(path: str, pid: int | None) -> Exception:
        holder = f"process {pid}" if pid else "another process"
        return ServerRunningError(f"{holder} serves the data directory {data} already (it holds {path}); stop "
                                  "it first, or give this server another --data")

    return WriterLock(data / LOCK_FILE, busy)


async def serve(options: ServeOptions, ready: Callable[[str, str], None],
                extension: ExtensionFactory | None = None) -> None:
    """Serve until SIGTERM or SIGINT; `ready(pulsar_url, http_url)` once both ports listen. `extension` runs
    beside the broker from then until the server stops."""
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
            await loop.run_in_executor(executor, broker.catalog.record_local_cluster, options.cluster)
            await _serve(options, broker, executor, ready, extension, *security)
        finally:
            await loop.run_in_executor(executor, broker.close)
    finally:
        executor.shutdown(wait=True)
        lock.release()


async def _serve(options: ServeOptions, broker: Broker, executor: ThreadPoolExecutor,
                 ready: Callable[[str, str], None], extension: ExtensionFactory | None, auth: AuthConfig,
                 tls: ssl.SSLContext | None) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    connections: set[Connection] = set()
    tasks: set[asyncio.Task[None]] = set()
    settings = Settings(options.cluster, "", options.max_message_size)
    service = BrokerService(broker, settings)
    authority = Authority(auth, Admin(broker), broker.clock)

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
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

    binary = await asyncio.start_server(on_connection, options.host, options.port, ssl=tls)
    running: Extension | None = None
    rest = RestContext(broker, Admin(broker), service, executor, authority=authority)
    http = web.AppRunner(make_app(rest), access_log=None, handle_signals=False,
                          shutdown_timeout=HTTP_SHUTDOWN_S)
    await http.setup()
    advertised = options.advertised_address or options.host
    port = binary.sockets[0].getsockname()[1]
    settings.broker_url = f"{'pulsar+ssl' if tls else 'pulsar'}://{advertised}:{port}"
    if tls is not None:  # the port speaks TLS only: both of LOOKUP's URLs name it
        settings.broker_url_tls = settings.broker_url
    try:
        await web.TCPSite(http, options.host, options.http_port, ssl_context=tls).start()
        http_port = http.addresses[0][1]
        rest.http_url = f"{'https' if tls else 'http'}://{advertised}:{http_port}"
        urls = ({"serviceUrlTls": rest.http_url, "brokerServiceUrlTls": settings.broker_url} if tls is not None
                else {"serviceUrl": rest.http_url, "brokerServiceUrl": settings.broker_url})
        await loop.run_in_executor(executor, lambda: Admin(broker).clusters.create(options.cluster, urls,
                                                                                   exist_ok=True))
        if extension is not None:
            running = extension(broker, options.cluster, executor)
            running.start()
            rest.replication_stats = running.replication_stats
        ready(settings.broker_url, rest.http_url)
        await stop.wait()
        logger.info("stopping: no new connections; answering what was received")
    finally:
        binary.close()
        if running is not None:
            await running.stop()
        await http.cleanup()
        for connection in list(connections):
            connection.stop_reading()
        if tasks:
            await asyncio.wait(list(tasks))
        await loop.run_in_executor(executor, service.deduplication.close)
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)


def run(options: ServeOptions, ready: Callable[[str, str], None], extension: ExtensionFactory | None = None) -> None:
    asyncio.run(serve(options, ready, extension))
