"""What every route module shares: the Route table entry, the context handlers run in (the Broker's admin API,
the binary protocol's BrokerService, the thread pool), and the request and response helpers.

Handlers never block the event loop: every call into the admin API (SQLite, cursor files, segment reads) goes
through `context.blocking`, which runs it in the server's thread pool, as connection.py does for the binary
protocol."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, TypeVar

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from seglog.admin.api import Admin
from seglog.broker import Broker
from seglog.errors import TopicNotFoundError
from seglog.names import NamespaceName, TopicName
from seglog.server.auth import Authority
from seglog.server.rest.errors import RestError
from seglog.server.service import BrokerService

T = TypeVar("T")

# Request bodies: JSON nested deeper than this is refused (Pulsar's bodies nest 3 deep at most; the decoder
# recurses once a level, and a body nested thousands deep would exhaust the stack), and a body must arrive
# within this long of its headers (a client announcing more than it sends would otherwise hold the request).
MAX_JSON_DEPTH = 64
REQUEST_BODY_TIMEOUT_S = 10.0

Handler = Callable[[web.Request, "RestContext"], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Route:
    """One route: method, path (aiohttp's `{name}` placeholders), handler, and what the OpenAPI document
    says of it (summary, the request body, the status codes it answers)."""

    method: str
    path: str
    handler: Handler
    summary: str
    codes: tuple[int, ...] = (200,)
    body: str | None = None  # the request body, described (None: no body)
    query: tuple[str, ...] = ()  # query parameters it reads


def _no_replication(topic: str, partition: int | None) -> dict[str, Any]:
    return {}


@dataclass
class RestContext:
    broker: Broker
    admin: Admin
    service: BrokerService
    executor: Executor
    http_url: str = ""  # http://host:port, what the HTTP lookup answers as httpUrl (https:// with TLS only)
    http_url_tls: str = ""  # https://host:port when the HTTP port or an --https-port serves TLS: httpUrlTls
    authority: Authority | None = None  # who may do what (server/auth.py); None: everyone everything
    flight_port: int = 0  # the Flight port (server/flight/), once it listens
    flight_tls: bool = False  # whether it serves TLS (grpc+tls://)
    # (seglog topic, partition or None for all) -> outbound replication per remote (app.Extension)
    replication_stats: Callable[[str, int | None], dict[str, dict[str, Any]]] = _no_replication
    # snapshot attempts of replicated subscriptions, pending and timed out (app.Extension); {}: no replication
    replicated_subscriptions_stats: Callable[[], dict[str, int]] = dict
    # (seglog topic, partition) -> per replicated subscription, the snapshots it has not passed (app.Extension)
    subscription_snapshots: Callable[[str, int], dict[str, list[dict[str, Any]]]] = _no_replication
    # (seglog topic, partitions, local only) -> the topic grown, the extension's users making room (app.Extension);
    # None: the admin API's growth
    grow_topic: Callable[[str, int, bool], Awaitable[None]] | None = None

    async def blocking(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, lambda: function(*args, **kwargs))


CONTEXT = web.AppKey("seglog", RestContext)


def wrap(handler: Handler) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handle(request: web.Request) -> web.StreamResponse:
        return await handler(request, request.app[CONTEXT])
    handle.__name__ = handler.__name__
    return handle


# requests

def tenant_of(request: web.Request) -> str:
    return request.match_info["tenant"]


def namespace_of(request: web.Request) -> str:
    """'tenant/namespace' of the path, validated (InvalidNameError: 412)."""
    return str(NamespaceName(request.match_info["tenant"], request.match_info["namespace"]))


def topic_of(request: web.Request) -> TopicName:
    """The topic of the path, validated (InvalidNameError: 412)."""
    return TopicName(request.match_info["tenant"], request.match_info["namespace"], request.match_info["topic"])


def partition_named(ctx: RestContext, topic: TopicName) -> tuple[TopicName, int | None]:
    """(the seglog topic, the partition) of a topic name (blocking): `NAME-partition-i` names partition i of a
    partitioned topic NAME, any other name a whole topic (None)."""
    base, sep, index = topic.topic.rpartition("-partition-")
    if sep and base and index.isdigit():
        name = TopicName(topic.tenant, topic.namespace, base)
        try:
            partitions = ctx.broker.topic(name).partitions
        except TopicNotFoundError:
            partitions = 0
        if partitions > 1 and int(index) < partitions:
            return name, int(index)
    return topic, None


async def json_body(request: web.Request, what: str, *, optional: bool = False) -> Any:
    """The request's JSON body, UTF-8 (RFC 8259, whatever charset the request names, as Pulsar's Jackson
    reads it); 400 naming `what` was expected when it is not UTF-8, not JSON, nested deeper than
    MAX_JSON_DEPTH, or missing (unless `optional`: then None); 413 past the server's body size, 408 when it
    has not all arrived within REQUEST_BODY_TIMEOUT_S."""
    data = await _body(request, what)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise RestError(400, f"the request body is not UTF-8 (byte {error.start} is "
                             f"{data[error.start:error.start + 1].hex()}); expected {what} as JSON in UTF-8") from None
    if not text.strip():
        if optional:
            return None
        raise RestError(400, f"the request has no body; expected {what}")
    try:
        document = json.loads(text)
    except RecursionError:  # (the decoder recurses once a level: far past MAX_JSON_DEPTH)
        raise _too_deep(what) from None
    except ValueError as error:
        raise RestError(400, f"the request body is not JSON ({error}); expected {what}") from None
    if not _nested_within(document, MAX_JSON_DEPTH):
        raise _too_deep(what)
    return document


def _too_deep(what: str) -> RestError:
    return RestError(400, f"the request body nests JSON arrays or objects more than {MAX_JSON_DEPTH} deep; "
                          f"expected {what}")


async def _body(request: web.Request, what: str) -> bytes:
    """The request's body, whole; RestError 413 past the server's size limit, 408 when it has not all arrived
    in time (a Content-Length larger than what is sent would hold the request for ever), 400 when it ends
    early or its chunked encoding is malformed."""
    try:
        return await asyncio.wait_for(request.read(), REQUEST_BODY_TIMEOUT_S)  # (asyncio.timeout: 3.11 on)
    except asyncio.TimeoutError:  # (TimeoutError itself from 3.11 on)
        raise RestError(408, f"the request body did not arrive within {REQUEST_BODY_TIMEOUT_S:g} s (Content-Length "
                             f"{request.content_length} announced); expected {what}") from None
    except web.HTTPRequestEntityTooLarge:
        raise RestError(413, f"the request body is larger than {request.client_max_size} bytes, the most this "
                             f"server accepts; expected {what}") from None
    except ConnectionResetError:  # (the client is gone: nobody reads this answer, and nothing failed here)
        raise RestError(400, f"the connection closed before the request body (Content-Length "
                             f"{request.content_length}) had arrived; expected {what}") from None
    except HttpProcessingError as error:  # (a chunked body found malformed once the handler reads it)
        raise RestError(400, f"the request body is malformed ({error.message}); expected {what}") from None


def _nested_within(document: Any, limit: int) -> bool:
    """Whether no array or object of `document` is nested more than `limit` deep (counted without recursing,
    so a document deep enough to exhaust the stack is measured too)."""
    stack = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        for child in children:
            if isinstance(child, dict | list):
                if depth >= limit:
                    return False
                stack.append((child, depth + 1))
    return True


def query_flag(request: web.Request, name: str) -> bool:
    """A boolean query flag (`?force=true`); 400 for a value that is neither true nor false."""
    value = request.query.get(name)
    if value is None or value.lower() == "false":
        return False
    if value.lower() in ("true", ""):
        return True
    raise RestError(400, f"query parameter {name}={value!r}: expected true or false")


def int_of(value: Any, what: str, *, minimum: int | None = None) -> int:
    """`value` if it is an int (not a bool) of at least `minimum`; else 400 naming `what`."""
    if isinstance(value, bool) or not isinstance(value, int) or (minimum is not None and value < minimum):
        bound = f" >= {minimum}" if minimum is not None else ""
        raise RestError(400, f"{what} must be an integer{bound}, not {json.dumps(value)}")
    return value


def path_int(request: web.Request, name: str, what: str, *, minimum: int = 0) -> int:
    text = request.match_info[name]
    try:
        value = int(text)
    except ValueError:
        raise RestError(400, f"{what} {text!r} is not an integer") from None
    return int_of(value, what, minimum=minimum)


# responses

def no_content() -> web.Response:
    return web.Response(status=204)


def json_response(document: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, text=json.dumps(document), content_type="application/json")
