"""`seglog serve`: the binary protocol and the admin HTTP port on one asyncio loop, over one Broker.

The server holds its data directory with a lock file (`serve.lock`, the server's pid in it), so a second
server on the same directory is refused; each partition it writes is held by its writer lock, as in-process.
SIGTERM or SIGINT: stop accepting, answer the commands already received (every SEND is written and
receipted), close the connections, then close the broker (writers flushed and closed), and exit 0."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import signal
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from seglog.admin.api import Admin
from seglog.broker import Broker
from seglog.clock import system_clock
from seglog.errors import InvalidArgumentError, ServerRunningError
from seglog.names import validate_part
from seglog.server.connection import Connection
from seglog.server.protocol.frames import MAX_FRAME_SIZE
from seglog.server.rest import RestContext, make_app
from seglog.server.service import BrokerService, Settings
from seglog.storage.lock import WriterLock

logger = logging.getLogger("seglog.server")

LOCK_FILE = "serve.lock"
WRITE_THREADS = 4
HTTP_SHUTDOWN_S = 5.0  # how long a stopping server lets HTTP requests in flight finish


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


def check_host(options: ServeOptions) -> None:
    """Only loopback without authentication, unless told otherwise (authentication is a later version)."""
    if options.host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(options.host).is_loopback
    except ValueError:
        loopback = False
    if not loopback and not options.allow_unauthenticated:
        raise InvalidArgumentError("host", options.host, "a loopback address (127.0.0.1), or another with "
                                   "--allow-unauthenticated: this version has no authentication")


def lock_data_directory(data: Path) -> WriterLock:
    data.mkdir(parents=True, exist_ok=True)

    def busy(path: str, pid: int | None) -> Exception:
        holder = f"process {pid}" if pid else "another process"
        return ServerRunningError(f"{holder} serves the data directory {data} already (it holds {path}); stop "
                                  "it first, or give this server another --data")

    return WriterLock(data / LOCK_FILE, busy)


async def serve(options: ServeOptions, ready: Callable[[str, str], None]) -> None:
    """Serve until SIGTERM or SIGINT; `ready(pulsar_url, http_url)` once both ports listen."""
    check_host(options)
    validate_part(options.cluster, kind="cluster name")  # registered in the catalog (GET /admin/v2/clusters)
    lock = lock_data_directory(options.data)
    executor = ThreadPoolExecutor(WRITE_THREADS, thread_name_prefix="seglog-serve")
    loop = asyncio.get_running_loop()
    try:
        broker = await loop.run_in_executor(executor, lambda: Broker.open(options.data, clock=system_clock,
                                                                          background=True))
        try:
            await _serve(options, broker, executor, ready)
        finally:
            await loop.run_in_executor(executor, broker.close)
    finally:
        executor.shutdown(wait=True)
        lock.release()


async def _serve(options: ServeOptions, broker: Broker, executor: ThreadPoolExecutor,
                 ready: Callable[[str, str], None]) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    connections: set[Connection] = set()
    tasks: set[asyncio.Task[None]] = set()
    settings = Settings(options.cluster, "", options.max_message_size)
    service = BrokerService(broker, settings)

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = Connection(service, reader, writer, executor, keepalive_s=options.keepalive_s)
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

    binary = await asyncio.start_server(on_connection, options.host, options.port)
    rest = RestContext(broker, Admin(broker), service, executor)
    http = web.AppRunner(make_app(rest), access_log=None, handle_signals=False,
                          shutdown_timeout=HTTP_SHUTDOWN_S)
    await http.setup()
    advertised = options.advertised_address or options.host
    port = binary.sockets[0].getsockname()[1]
    settings.broker_url = f"pulsar://{advertised}:{port}"
    try:
        await web.TCPSite(http, options.host, options.http_port).start()
        http_port = http.addresses[0][1]
        rest.http_url = f"http://{advertised}:{http_port}"
        await loop.run_in_executor(executor, lambda: Admin(broker).clusters.create(
            options.cluster, {"serviceUrl": rest.http_url, "brokerServiceUrl": settings.broker_url}, exist_ok=True))
        ready(settings.broker_url, rest.http_url)
        await stop.wait()
        logger.info("stopping: no new connections; answering what was received")
    finally:
        binary.close()
        await http.cleanup()
        for connection in list(connections):
            connection.stop_reading()
        if tasks:
            await asyncio.wait(list(tasks))
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)


def run(options: ServeOptions, ready: Callable[[str, str], None]) -> None:
    asyncio.run(serve(options, ready))
