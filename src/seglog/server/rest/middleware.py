"""The one place every HTTP request goes through: authentication and authorization (the `Authorization`
header, Bearer or Basic, or the client certificate on https, decided by server/auth.py's Authority.check_http:
401 without valid credentials, 403 without the role's right), the handler, and the mapping of errors to
Pulsar's statuses and `{"reason": ...}` bodies (errors.py). aiohttp's own answers (no such route, method not
allowed) get the same JSON body."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from seglog.errors import SeglogError
from seglog.server import auth
from seglog.server.errors import ServerFailure
from seglog.server.rest.base import CONTEXT
from seglog.server.rest.errors import RestError, error_body, status_of

logger = logging.getLogger("seglog.server")

# The reason of a 500: what failed is in the server's log (with its traceback), never in the answer, which
# would tell any client about the server's code.
INTERNAL_ERROR = "the server failed to answer this request (an internal error, logged by the server)"


# Open to anyone, with authentication on too: the health check (liveness only: it touches no data, unlike
# Pulsar's, which writes to a topic and needs a superuser), /metrics (Pulsar's default,
# authenticateMetricsEndpoint=false) and the OpenAPI document.
OPEN_PATHS = frozenset({"/admin/v2/brokers/health", "/metrics", "/admin/v2/openapi.json"})
# Open to any authenticated role: where the server's Flight port is (each read on it is authorized there)
ANY_ROLE_PATHS = frozenset({"/seglog/v1/flight"})
TENANT_RECORD = "/admin/v2/tenants/{tenant}"
NAMESPACE_TOPIC_LISTS = frozenset({"/admin/v2/namespaces/{tenant}/{namespace}/topics",
                                   "/admin/v2/persistent/{tenant}/{namespace}",
                                   "/admin/v2/persistent/{tenant}/{namespace}/partitioned",
                                   "/admin/v2/non-persistent/{tenant}/{namespace}",
                                   "/admin/v2/non-persistent/{tenant}/{namespace}/partitioned"})
# Topic paths whose GET is for the tenant's admins too, as Pulsar's TopicOperation.COMPACT is (its status as well)
ADMIN_READS = frozenset({"/admin/v2/persistent/{tenant}/{namespace}/{topic}/compaction"})


def access(request: web.Request) -> tuple[str | None, tuple[str, ...]] | None:
    """What a request needs when authentication is on, as Authority.check_http takes it: (resource, actions),
    or None when it is open to anyone. Pulsar's rules: the broker's own resources (clusters, the tenants list,
    maintenance) and creating, changing or deleting a tenant are for superusers; everything within a tenant
    for its admin roles; a role granted produce or consume on a namespace may also list its topics and read
    its topics' stats, partitions and lookups (not their compaction status: ADMIN_READS), and a role granted
    consume may act on subscriptions."""
    if request.path in OPEN_PATHS:
        return None
    info = request.match_info
    tenant = info.get("tenant")
    resource = info.route.resource
    template = resource.canonical if resource is not None else ""
    reading = request.method in ("GET", "HEAD")
    if tenant is None or (template == TENANT_RECORD and not reading):
        return None, ()
    namespace, topic = info.get("namespace"), info.get("topic")
    if namespace is None:
        return tenant, ()
    if topic is None:
        return f"{tenant}/{namespace}", auth.LOOKUP if reading and template in NAMESPACE_TOPIC_LISTS else ()
    name = f"{tenant}/{namespace}/{topic}"
    if "subscription" in info:
        return name, auth.CONSUME
    return name, auth.LOOKUP if reading and template not in ADMIN_READS else ()


async def authenticate(request: web.Request) -> None:
    """Refuse (RestError 401 or 403) a request the client's role may not make; nothing when authentication
    is off."""
    context = request.app[CONTEXT]
    authority = context.authority
    if authority is None or not authority.enabled:
        return
    needed = access(request)
    if needed is None:
        return
    resource, actions = needed
    try:
        await context.blocking(authority.check_http, request.headers.get("Authorization"), resource, actions,
                               certificate=_peer_certificate(request), any_role=request.path in ANY_ROLE_PATHS)
    except auth.HttpRefusal as refusal:
        raise RestError(refusal.status, refusal.reason) from None


def _peer_certificate(request: web.Request) -> auth.PeerCertificate | None:
    """The client certificate the TLS handshake verified (https with --tls-trust-certs-file), else None."""
    transport = request.transport
    return None if transport is None else transport.get_extra_info("peercert")


@web.middleware
async def dispatch(request: web.Request,
                   handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
    try:
        await authenticate(request)
        return await handler(request)
    except RestError as error:
        return _error(error.status, error)
    except (SeglogError, ServerFailure) as error:
        return _error(status_of(error), error)
    except web.HTTPException as error:
        if error.status < 400:
            raise
        reason = {404: f"{request.method} {request.path} is not served by seglog (see GET /admin/v2/openapi.json)",
                  405: f"{request.method} is not allowed on {request.path}"}.get(error.status, error.reason)
        return _error(error.status, RestError(error.status, reason))
    except Exception:  # (answered 500 without what failed, which is logged; the server goes on)
        logger.exception("%s %s failed", request.method, request.path)
        return _error(500, RestError(500, INTERNAL_ERROR))


def _error(status: int, error: RestError | SeglogError | ServerFailure) -> web.Response:
    return web.json_response(error_body(error), status=status)
