"""Who may do what on `seglog serve`: Pulsar's authentication providers (token, basic, tls) and its
authorization rules.

Authentication is on when at least one provider is, as `authenticationProviders` lists them in Pulsar; a
client picks one by CONNECT's `auth_method_name` (over HTTP: the `Authorization` header's scheme, or its TLS
certificate when it sends no header), and the provider's answer is the client's role:

- token, Pulsar's AuthenticationProviderToken with a secret key: a JWT signed with HS256 by the server's secret
  key (the raw key bytes in a file, as `pulsar tokens create-secret-key` writes it); the role is its subject
  (`sub`). `exp` and `nbf`, when the token has them, are checked against the server's clock. Tokens are made by
  `create_token` (`seglog tokens create`), with the header and claims Pulsar's tool writes.
- basic, Pulsar's AuthenticationProviderBasic: `user:password` checked against an htpasswd file (htpasswd.py);
  the role is the user.
- tls, Pulsar's AuthenticationProviderTls: the client's certificate, verified by the TLS handshake against the
  server's trusted CAs; the role is the certificate's subject common name (CN).

A method no provider answers, "none" (no credentials) among them, gives the anonymous role when one is set
(Pulsar's anonymousUserRole), as Pulsar's broker does; without one the client is refused. Credentials a
provider checks and refuses are never taken for anonymous.

Authorization is Pulsar's PulsarAuthorizationProvider, for what seglog has: a superuser may do everything;
a tenant's admin roles (`adminRoles`) everything within that tenant; any other role what the namespace
grants it, `produce` and/or `consume` on every topic of the namespace (`grant-permission`). Looking a topic
up (LOOKUP, PARTITIONED_METADATA) or listing a namespace's topics needs either action.

Both ports use it: the binary protocol (connection.py) calls `Authority.authenticate` for CONNECT and
`Authority.authorize_topic` (or `authorize_namespace`) for each request that names a topic or namespace;
the admin HTTP port calls `Authority.check_http` with the request's `Authorization` header, its client
certificate and the resource it acts on. With no provider, authentication is off and everything is allowed,
as on a Pulsar broker without authentication. Checks read the catalog (SQLite) and hash passwords: call them
in the server's thread pool."""

from __future__ import annotations

import base64
import binascii
import secrets
from collections.abc import Collection, Iterable, Mapping
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
from seglog.server.htpasswd import Htpasswd
from seglog.server.protocol import pulsar_api_pb2 as api

SECRET_KEY_BYTES = 32  # HS256's key length (RFC 7518 3.2), as Pulsar's create-secret-key makes it
ALGORITHM = "HS256"
# CONNECT's auth_method_name of each provider, as Pulsar's clients send them
TOKEN_METHOD = "token"  # AuthenticationToken
BASIC_METHOD = "basic"  # AuthenticationBasic (its default; the client may name another)
TLS_METHOD = "tls"  # AuthenticationTLS
NO_CREDENTIALS = ("", "none")  # CONNECT's auth_method_name without any authentication
BEARER = "Bearer "
# the Authorization header's schemes (case-insensitive, RFC 9110 11.1) and the provider each is for
HTTP_SCHEMES = {"bearer": TOKEN_METHOD, "basic": BASIC_METHOD}

# A verified client certificate as the ssl module gives it (SSLObject.getpeercert()); None without one
PeerCertificate = Mapping[str, Any]

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


def common_name(certificate: PeerCertificate | None) -> str | None:
    """The role of a verified client certificate, as Pulsar's AuthenticationProviderTls takes it: the subject's
    common name (CN). Of several, the most specific: Pulsar reads the first of Java's RFC 2253 form, which lists
    the subject's names last to first."""
    if not certificate:
        return None
    names = [value for name in certificate.get("subject", ()) for key, value in name if key == "commonName"]
    return names[-1] if names and names[-1] else None


# the server's side

@dataclass(frozen=True)
class AuthConfig:
    """`seglog serve`'s security settings: the providers that are on (none: authentication is off, and anyone
    may do anything), the superuser roles and the anonymous role."""

    secret_key: bytes | None = None  # token authentication with this HS256 key
    superusers: frozenset[str] = frozenset()
    # the role of clients that present no credentials (Pulsar's anonymousUserRole); None: they are refused
    anonymous_role: str | None = None
    basic_users: Htpasswd | None = None  # basic authentication against these users
    tls: bool = False  # TLS client certificate authentication (the certificates verified by the handshake)

    @property
    def methods(self) -> tuple[str, ...]:
        """The auth_method_names of the providers that are on."""
        return tuple(method for method, on in ((TOKEN_METHOD, self.secret_key is not None),
                                               (BASIC_METHOD, self.basic_users is not None),
                                               (TLS_METHOD, self.tls)) if on)

    @property
    def enabled(self) -> bool:
        return bool(self.methods)


_CLIENT_SIDE = {TOKEN_METHOD: "a token (AuthenticationToken)", BASIC_METHOD: "a user and password "
                "(AuthenticationBasic)", TLS_METHOD: "a client certificate (AuthenticationTLS)"}


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

    def authenticate(self, method: str, data: bytes | str, certificate: PeerCertificate | None = None) -> Principal:
        """The principal of a CONNECT's credentials (`auth_method_name`, `auth_data`) on a connection whose
        verified client certificate is `certificate`. Never raises: a refusal is kept in the Principal and
        answered at the connection's first request."""
        config = self.config
        if not config.enabled:
            return OPEN
        if method == TOKEN_METHOD and config.secret_key is not None:
            token = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
            try:
                claims = verify_token(config.secret_key, token, self._clock())
            except TokenRefused as refusal:
                return Principal(None, refusal=str(refusal))
            return Principal(claims.role, claims.expires_ms)
        if method == BASIC_METHOD and config.basic_users is not None:
            return self._basic(config.basic_users, data)
        if method == TLS_METHOD and config.tls:
            role = common_name(certificate)
            if role is None:
                return Principal(None, refusal="no client certificate: AuthenticationTLS needs a TLS connection "
                                               "and a certificate with a common name (CN), signed by a CA this "
                                               "server trusts")
            return Principal(role)
        # As Pulsar's ServerCnx: a method without a provider, "none" among them, is the anonymous role if any
        return self._anonymous(method)

    @staticmethod
    def _basic(users: Htpasswd, data: bytes | str) -> Principal:
        """AuthenticationBasic's `user:password` (a password may hold ':', a user may not: RFC 7617)."""
        try:
            text = data.decode("utf-8") if isinstance(data, bytes) else data
        except UnicodeDecodeError:
            return Principal(None, refusal="the basic credentials are not UTF-8 text")
        user, colon, password = text.partition(":")
        if not colon:
            return Principal(None, refusal="the basic credentials are not 'user:password'")
        if not users.check(user, password):
            return Principal(None, refusal="unknown user or wrong password")  # (which, as Pulsar, not said)
        return Principal(user)

    def _anonymous(self, method: str) -> Principal:
        if self.config.anonymous_role is not None:
            return Principal(self.config.anonymous_role)
        accepted = " or ".join(_CLIENT_SIDE[name] for name in self.config.methods)
        if method in NO_CREDENTIALS:
            return Principal(None, refusal=f"authentication required: this server accepts clients with {accepted}")
        return Principal(None, refusal=f"authentication method {method!r} is not enabled on this server; it "
                                       f"accepts {accepted}")

    def authenticate_http(self, authorization: str | None, certificate: PeerCertificate | None = None) -> Principal:
        """The principal of an HTTP request: its `Authorization` header (None: absent) decides by its scheme;
        without one, its verified client certificate (None: none), as AuthenticationTLS; else anonymous."""
        if not self.config.enabled:
            return OPEN
        if not authorization:
            return self.authenticate(TLS_METHOD if certificate and self.config.tls else "none", b"", certificate)
        scheme, _, credentials = authorization.strip().partition(" ")
        method = HTTP_SCHEMES.get(scheme.lower(), scheme)
        credentials = credentials.strip()
        if method == BASIC_METHOD and self.config.basic_users is not None:
            try:
                return self.authenticate(method, base64.b64decode(credentials, validate=True), certificate)
            except binascii.Error:
                return Principal(None, refusal="the Basic credentials are not base64 of 'user:password'")
        return self.authenticate(method, credentials, certificate)

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

    def check_http(self, authorization: str | None, resource: str | None = None, actions: Collection[str] = (),
                   *, certificate: PeerCertificate | None = None, any_role: bool = False) -> str | None:
        """For the admin HTTP port: the role of a request whose `Authorization` header is `authorization` and
        whose verified client certificate is `certificate` (authenticate_http), if it may act on `resource`;
        else HttpRefusal 401 (not authenticated) or 403 (not allowed). None when authentication is off.

        `resource` is what the request acts on: None for the whole broker (clusters, brokers, the list of
        tenants: superusers only), 'tenant' (superusers and the tenant's admin roles), 'tenant/namespace'
        or a topic 'tenant/namespace/topic' (also with `persistent://`): the same, plus a role the namespace
        grants one of `actions` (e.g. LOOKUP for the HTTP lookup and topic stats, as Pulsar allows them).
        `any_role`: any authenticated role may (what the server tells its clients about itself)."""
        principal = self.authenticate_http(authorization, certificate)
        if principal is OPEN:
            return None
        try:
            role = self._role(principal)
        except ServerFailure as failure:
            raise HttpRefusal(401, str(failure)) from None
        if any_role or role in self.config.superusers:
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
