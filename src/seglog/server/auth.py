"""Who may do what on `seglog serve`: token authentication as Pulsar's, and Pulsar's authorization rules.

Authentication is Pulsar's AuthenticationProviderToken with a secret key: a client presents a JWT signed
with HS256 by the server's secret key (the raw key bytes in a file, as `pulsar tokens create-secret-key`
writes it), and the token's subject (`sub`) is the client's role. `exp` and `nbf`, when the token has them,
are checked against the server's clock. Tokens are made by `create_token` (`seglog tokens create`), with
the header and claims Pulsar's tool writes, so tokens from either work with both.

Authorization is Pulsar's PulsarAuthorizationProvider, for what seglog has: a superuser may do everything;
a tenant's admin roles (`adminRoles`) everything within that tenant; any other role what the namespace
grants it, `produce` and/or `consume` on every topic of the namespace (`grant-permission`). Looking a topic
up (LOOKUP, PARTITIONED_METADATA) or listing a namespace's topics needs either action.

Both ports use it: the binary protocol (connection.py) calls `Authority.authenticate` for CONNECT and
`Authority.authorize_topic` (or `authorize_namespace`) for each request that names a topic or namespace;
the admin HTTP port calls `Authority.check_http` with the request's `Authorization` header and the resource
it acts on. With no secret key, authentication is off and everything is allowed, as on a Pulsar broker
without authentication. Checks read the catalog (SQLite): call them in the server's thread pool."""

from __future__ import annotations

import secrets
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import jwt  # PyJWT

from seglog.admin.api import Admin
from seglog.clock import Clock
from seglog.errors import InvalidArgumentError, NotFoundError
from seglog.names import NamespaceName, TopicName
from seglog.server.errors import ServerFailure
from seglog.server.protocol import pulsar_api_pb2 as api

SECRET_KEY_BYTES = 32  # HS256's key length (RFC 7518 3.2), as Pulsar's create-secret-key makes it
ALGORITHM = "HS256"
TOKEN_METHOD = "token"  # CONNECT's auth_method_name with AuthenticationToken
NO_CREDENTIALS = ("", "none")  # CONNECT's auth_method_name without any authentication
BEARER = "Bearer "

# What a request needs, on the topic's namespace: any one of the actions (superusers and the tenant's admin
# roles need none). Pulsar's TopicOperation LOOKUP (canLookup = canProduce or canConsume), PRODUCE, CONSUME.
LOOKUP = ("produce", "consume")
PRODUCE = ("produce",)
CONSUME = ("consume",)


# tokens and keys (also `seglog tokens`)

def create_secret_key() -> bytes:
    """A new random HS256 secret key: 32 raw bytes, as Pulsar's `tokens create-secret-key` makes one."""
    return secrets.token_bytes(SECRET_KEY_BYTES)


def read_secret_key(path: str | Path, *, argument: str = "secret key file") -> bytes:
    """The raw key bytes of a secret key file (a path, or a `file:` URL as Pulsar's settings give it)."""
    text = str(path)
    location = Path(text.removeprefix("file://") if text.startswith("file://") else text.removeprefix("file:"))
    try:
        key = location.read_bytes()
    except OSError as error:
        raise InvalidArgumentError(argument, text, "a readable file holding the secret key's raw bytes (seglog "
                                   "tokens create-secret-key --output FILE writes one)",
                                   detail=error.strerror or str(error)) from None
    return check_secret_key(key, argument=argument, given=text)


def check_secret_key(key: bytes, *, argument: str = "secret key", given: object = None) -> bytes:
    if len(key) < SECRET_KEY_BYTES:
        raise InvalidArgumentError(argument, key if given is None else given,
                                   f"a secret key of at least {SECRET_KEY_BYTES} bytes (HS256, RFC 7518 3.2), as "
                                   "seglog tokens create-secret-key and Pulsar's tokens create-secret-key make",
                                   detail=f"it has {len(key)} bytes")
    return key


def create_token(key: bytes, subject: str, *, expires_at_s: int | None = None) -> str:
    """A token for role `subject`, signed with `key` (HS256), valid until `expires_at_s` (seconds since the
    epoch) or for ever: header `{"alg": "HS256"}` and claims `sub` and `exp`, as Pulsar's `tokens create`."""
    check_secret_key(key)
    if not isinstance(subject, str) or not subject or subject != subject.strip():
        raise InvalidArgumentError("subject", subject, "a role name: text without spaces at either end")
    claims: dict[str, Any] = {"sub": subject}
    if expires_at_s is not None:
        claims["exp"] = int(expires_at_s)
    return jwt.encode(claims, key, algorithm=ALGORITHM, headers={"typ": None})


@dataclass(frozen=True)
class Claims:
    role: str
    expires_ms: int | None  # None: never


class TokenRefused(Exception):
    """A token that does not authenticate anyone; the message says why."""


def verify_token(key: bytes, token: str, now_ms: int) -> Claims:
    """The role of a token signed with `key` and valid at `now_ms`; TokenRefused naming the reason."""
    token = token.removeprefix(BEARER).strip()
    try:
        claims = jwt.decode(token, key, algorithms=[ALGORITHM],
                            options={"verify_exp": False, "verify_nbf": False, "verify_iat": False,
                                     "verify_aud": False, "verify_iss": False})
    except jwt.InvalidSignatureError:
        raise TokenRefused("the token's signature does not match the server's secret key (a token made with "
                           "another key, or altered)") from None
    except jwt.InvalidAlgorithmError:
        raise TokenRefused(f"the token is not signed with {ALGORITHM}, the only algorithm this server "
                           "accepts") from None
    except jwt.PyJWTError as error:
        raise TokenRefused(f"the token is not a valid JWT: {error}") from None
    role = claims.get("sub")
    if not isinstance(role, str) or not role:
        raise TokenRefused("the token has no subject (`sub`), which names the role")
    expires = claims.get("exp")
    if expires is not None:
        if isinstance(expires, bool) or not isinstance(expires, (int, float)):
            raise TokenRefused(f"the token's expiry (`exp`) {expires!r} is not a time in seconds")
        if now_ms >= expires * 1000:
            raise TokenRefused(f"the token of role {role!r} expired at {_utc(expires)}")
    not_before = claims.get("nbf")
    if isinstance(not_before, (int, float)) and not isinstance(not_before, bool) and now_ms < not_before * 1000:
        raise TokenRefused(f"the token of role {role!r} is not valid before {_utc(not_before)}")
    return Claims(role, None if expires is None else int(expires * 1000))


def _utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# the server's side

@dataclass(frozen=True)
class AuthConfig:
    """`seglog serve`'s security settings. No secret key: authentication is off (anyone may do anything)."""

    secret_key: bytes | None = None
    superusers: frozenset[str] = frozenset()
    # the role of clients that present no credentials (Pulsar's anonymousUserRole); None: they are refused
    anonymous_role: str | None = None

    @property
    def enabled(self) -> bool:
        return self.secret_key is not None


@dataclass(frozen=True)
class Principal:
    """Who a connection is: its role, or why it is refused (reported at its first request, where the client
    raises it at once; a refused CONNECT would only make the client retry until its timeout)."""

    role: str | None
    expires_ms: int | None = None
    refusal: str | None = None


OPEN = Principal(None)  # authentication off


class HttpRefusal(Exception):
    """An HTTP request refused: `status` 401 (not authenticated) or 403 (not allowed); `reason` for Pulsar's
    `{"reason": ...}` body."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class Authority:
    """The server's authentication and authorization, over the catalog's admin roles and permissions."""

    def __init__(self, config: AuthConfig, admin: Admin, clock: Clock) -> None:
        self.config = config
        self._admin = admin
        self._clock = clock

    @property
    def enabled(self) -> bool:
        return self.config.enabled

    # authentication

    def authenticate(self, method: str, data: bytes | str) -> Principal:
        """The principal of a CONNECT's credentials (`auth_method_name`, `auth_data`). Never raises: a refusal
        is kept in the Principal and answered at the connection's first request."""
        if self.config.secret_key is None:
            return OPEN
        if method in NO_CREDENTIALS:
            return self._anonymous()
        if method != TOKEN_METHOD:
            if method == "tls":
                detail = ("client certificate authentication (AuthenticationTLS) is not supported by seglog "
                          "serve; use a token (AuthenticationToken)")
            else:
                detail = f"authentication method {method!r} is not supported by seglog serve; use a token " \
                         "(AuthenticationToken)"
            return Principal(None, refusal=detail)
        token = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        try:
            claims = verify_token(self.config.secret_key, token, self._clock())
        except TokenRefused as refusal:
            return Principal(None, refusal=str(refusal))
        return Principal(claims.role, claims.expires_ms)

    def _anonymous(self) -> Principal:
        if self.config.anonymous_role is not None:
            return Principal(self.config.anonymous_role)
        return Principal(None, refusal="authentication required: this server accepts clients with a token only "
                                       "(AuthenticationToken)")

    def authenticate_http(self, authorization: str | None) -> Principal:
        """The principal of an HTTP request's `Authorization` header (None: absent)."""
        if self.config.secret_key is None:
            return OPEN
        if not authorization:
            return self._anonymous()
        if not authorization.startswith(BEARER):
            return Principal(None, refusal="only 'Authorization: Bearer <token>' is accepted")
        return self.authenticate(TOKEN_METHOD, authorization[len(BEARER):])

    def _role(self, principal: Principal) -> str:
        """The role of an authenticated principal; AuthenticationError otherwise (its token expired since)."""
        if principal.refusal is not None or principal.role is None:
            raise ServerFailure(api.AuthenticationError, principal.refusal or "not authenticated")
        if principal.expires_ms is not None and self._clock() >= principal.expires_ms:
            raise ServerFailure(api.AuthenticationError, f"the token of role {principal.role!r} expired at "
                                                         f"{_utc(principal.expires_ms / 1000)}")
        return principal.role

    # authorization

    def authorize_topic(self, principal: Principal, topic: str, actions: Collection[str], doing: str) -> None:
        """Refuse with ServerFailure what `principal` may not do on `topic`: AuthenticationError if it is not
        authenticated, AuthorizationError if its role has none of `actions` on the topic's namespace (and is
        neither a superuser nor an admin role of the tenant). `doing` says what was asked, for the message."""
        if principal is OPEN:
            return
        role = self._role(principal)
        name = TopicName.parse(topic.replace("non-persistent://", "persistent://", 1))
        if not self.allowed(role, name.tenant, name.namespace_name, actions):
            raise ServerFailure(api.AuthorizationError, _not_allowed(role, doing, name.tenant, name.namespace_name,
                                                                     actions))

    def authorize_namespace(self, principal: Principal, namespace: str, actions: Collection[str],
                            doing: str) -> None:
        """authorize_topic for a namespace 'tenant/namespace' (listing its topics)."""
        if principal is OPEN:
            return
        role = self._role(principal)
        name = NamespaceName.parse(namespace)
        if not self.allowed(role, name.tenant, str(name), actions):
            raise ServerFailure(api.AuthorizationError, _not_allowed(role, doing, name.tenant, str(name), actions))

    def allowed(self, role: str, tenant: str | None, namespace: str | None, actions: Iterable[str]) -> bool:
        """Pulsar's rule: a superuser everywhere; the tenant's admin roles within it; others what the
        namespace grants them (any one of `actions`)."""
        if role in self.config.superusers:
            return True
        if tenant is None:
            return False
        if role in self.admin_roles(tenant):
            return True
        if namespace is None:
            return False
        granted = self.permissions(namespace).get(role, ())
        return any(action in granted for action in actions)

    def admin_roles(self, tenant: str) -> list[str]:
        try:
            roles: list[str] = self._admin.tenants.get(tenant)["adminRoles"]
            return roles
        except (NotFoundError, InvalidArgumentError):
            return []

    def permissions(self, namespace: str) -> dict[str, list[str]]:
        try:
            return self._admin.namespaces.permissions(namespace)
        except (NotFoundError, InvalidArgumentError):
            return {}

    def check_http(self, authorization: str | None, resource: str | None = None,
                   actions: Collection[str] = ()) -> str | None:
        """For the admin HTTP port: the role of a request whose `Authorization` header is `authorization`,
        if it may act on `resource`; else HttpRefusal 401 (no valid token) or 403 (not allowed). None when
        authentication is off.

        `resource` is what the request acts on: None for the whole broker (clusters, brokers, the list of
        tenants: superusers only), 'tenant' (superusers and the tenant's admin roles), 'tenant/namespace'
        or a topic 'tenant/namespace/topic' (also with `persistent://`): the same, plus a role the namespace
        grants one of `actions` (e.g. LOOKUP for the HTTP lookup and topic stats, as Pulsar allows them)."""
        principal = self.authenticate_http(authorization)
        if principal is OPEN:
            return None
        try:
            role = self._role(principal)
        except ServerFailure as failure:
            raise HttpRefusal(401, str(failure)) from None
        if role in self.config.superusers:
            return role
        try:
            tenant, namespace = (None, None) if resource is None else _owner(resource)
        except InvalidArgumentError as error:
            raise HttpRefusal(403, f"role {role!r} may not act on {resource!r}: {error}") from None
        if not self.allowed(role, tenant, namespace, actions):
            raise HttpRefusal(403, _not_allowed(role, "do this", tenant, namespace, actions))
        return role


def _owner(resource: str) -> tuple[str, str | None]:
    """(tenant, 'tenant/namespace' or None) of 'tenant', 'tenant/namespace' or a topic name."""
    if resource.startswith(("persistent://", "non-persistent://")):
        parts = resource.split("://", 1)[1].split("/")
    else:
        parts = resource.split("/")
    if len(parts) == 1:
        return parts[0], None
    if len(parts) == 2:
        return parts[0], str(NamespaceName.parse(resource))
    name = TopicName.parse("persistent://" + "/".join(parts))
    return name.tenant, name.namespace_name


def _not_allowed(role: str, doing: str, tenant: str | None, namespace: str | None, actions: Collection[str]) -> str:
    if tenant is None:
        return f"role {role!r} is not authorized to {doing}: superusers only"
    where = f"the tenant {tenant}"
    if namespace is not None and actions:
        needs = " or ".join(repr(action) for action in actions)
        return (f"role {role!r} is not authorized to {doing}: it needs the {needs} permission on namespace "
                f"{namespace} (grant-permission), or to be an admin role of tenant {tenant} or a superuser")
    return f"role {role!r} is not authorized to {doing}: only an admin role of {where} or a superuser is"
