"""Who a Flight call comes from: the gRPC header `authorization`, read as the HTTP port reads its
`Authorization` header (`Bearer <token>` or `Basic <base64 of user:password>`, server/auth.py's
Authority.authenticate_http), so a client presents the same credentials on every port.

A call whose credentials are refused, or that presents none where there is no anonymous role, is refused
before it runs: FlightUnauthenticatedError with the reason the HTTP port's 401 gives. What the role may do is
asked by each method (service.py: DoGet needs `consume` on the topic).

TLS client certificates are not a Flight role (--auth-tls): pyarrow's server gives a call gRPC's peer identity,
never the certificate, and that identity is the certificate's first subject alternative name when it has one,
else its first common name, where Pulsar's rule (auth.common_name) is the common name: a certificate of CN
alice with the DNS name admin would be role admin here and alice on the other ports."""

from __future__ import annotations

from typing import Any

from pyarrow import flight

from seglog.server.auth import Authority, Principal

MIDDLEWARE = "seglog-auth"  # the key of the middleware in each call's context
HEADER = "authorization"  # gRPC metadata keys are lower case


class CallPrincipal(flight.ServerMiddleware):
    """The principal of one call (auth.OPEN when authentication is off)."""

    def __init__(self, principal: Principal) -> None:
        self.principal = principal


class Authentication(flight.ServerMiddlewareFactory):
    """Authenticates every call from its `authorization` header (the Authority reads the catalog and hashes
    passwords: it runs on gRPC's thread, never on the server's event loop)."""

    def __init__(self, authority: Authority) -> None:
        super().__init__()
        self._authority = authority

    def start_call(self, info: flight.CallInfo, headers: dict[str, list[Any]]) -> CallPrincipal:
        values = headers.get(HEADER) or [None]
        authorization = values[0].decode("utf-8", "replace") if isinstance(values[0], bytes) else values[0]
        principal = self._authority.authenticate_http(authorization)
        if principal.refusal is not None:
            raise flight.FlightUnauthenticatedError(principal.refusal)
        return CallPrincipal(principal)


def principal_of(context: flight.ServerCallContext) -> Principal:
    """The principal Authentication found for the call of `context`."""
    middleware = context.get_middleware(MIDDLEWARE)
    if not isinstance(middleware, CallPrincipal):  # (every call goes through Authentication)
        raise flight.FlightUnauthenticatedError("the call was not authenticated")
    return middleware.principal
