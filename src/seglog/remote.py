"""The admin API of a `seglog serve` over its HTTP port, with the methods, arguments, answers and errors of
seglog.admin's API (Admin, Tenants, Namespaces, Topics): `seglog --url http://HOST:PORT` runs every admin command
with it, the same code on a server as on a data directory (cli/datadir.py's `DataDir.admin()` gives one or the
other), and the Spark connector's driver plans with it (`serviceUrl`). Clusters have their own class too
(RemoteClusters).

Why it is not in admin/: the admin layer is protocol-free and sits below the server, which serves it; an HTTP
client of that server is a user of the server, as the CLI and the Spark connector are. It sits below the CLI and
knows nothing of the command line: its users give it their Credentials, and the words to say how to give them.
It imports nothing of seglog.server: the paths are those the server documents in
GET /admin/v2/openapi.json (docs/SERVER.md, "Admin REST"), and tests/cli runs every admin command both ways
and compares the outputs.

Arguments are checked here as the local API checks them (the same parsers), before any request. The server's
refusals come back as the exceptions the local API raises: its error bodies name the exception's class, and
for an invalid argument the argument, value and what is accepted (server/rest/errors.py).

A server with authentication needs a token (Credentials.token), sent as `Authorization: Bearer <token>`; a
refusal for want of one (401, 403) is NotAuthorizedError, saying how to give it (Credentials.how_to_give_token).
An https:// server whose certificate is not signed by a CA the system trusts needs that CA's certificate file
(Credentials.trust_file, Pulsar's tlsTrustCertsFilePath); a server that cannot be reached is
ServerUnreachableError."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from seglog import errors
from seglog.catalog.clusters import check_cluster_data, cluster_names
from seglog.catalog.policies import (
    QUOTA_TYPES,
    SECOND_MS,
    AutoTopicCreation,
    BacklogQuota,
    Retention,
    parse_compaction_threshold,
    parse_ttl,
)
from seglog.catalog.schemas import UNDEFINED, checked_strategy
from seglog.lifecycle.maintenance import MaintenanceReport
from seglog.names import NamespaceName, TopicName, validate_part, validate_subscription_name

TIMEOUT_S = 60.0
_ERRORS = {name: getattr(errors, name) for name in (
    "TopicNotFoundError", "NotFoundError", "AlreadyExistsError", "TopicExistsError", "NotEmptyError",
    "TopicInUseError", "ConsumerBusyError", "ClusterInUseError", "ClosedError", "ConfigurationStoreError",
    "IncompatibleSchemaError", "SeglogError")}
_ARGUMENT_ERRORS = {name: getattr(errors, name) for name in (
    "InvalidArgumentError", "InvalidNameError", "UnusableClusterError", "ClusterNotAllowedError",
    "InvalidSchemaError")}


class _Repr:
    """A value the server could only send as its repr: shown as it was."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _body(response: httpx.Response) -> dict:
    """A refusal's JSON object ({"reason": ..., "error": ...}), or {} when its body is not one."""
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _refusal(response: httpx.Response) -> Exception:
    """The exception a refused request stands for (the local API's, where the server names it)."""
    body = _body(response)
    reason = body.get("reason") or f"{response.status_code} {response.reason_phrase}"
    kind = body.get("error")
    if kind in _ARGUMENT_ERRORS and "argument" in body:
        value = body["value"] if "value" in body else _Repr(body.get("valueRepr", "?"))
        return _ARGUMENT_ERRORS[kind](body["argument"], value, body.get("accepted", ""), body.get("detail"))
    if kind in _ERRORS:
        return _ERRORS[kind](reason)
    if response.status_code == 404:
        return errors.NotFoundError(reason)
    return errors.SeglogError(f"the server refused {response.request.method} {response.request.url.path} "
                              f"({response.status_code}): {reason}")


@dataclass(frozen=True)
class Credentials:
    """What a client of a server presents: a token (sent as `Authorization: Bearer <token>`), the CA certificates
    an https:// server's certificate is checked against (None: the system's), and how its user gives them, as
    said when the server refuses (the command line's options, or the Spark connector's)."""
    token: str | None = None
    trust_file: str | None = None
    how_to_give_token: str = "a token"
    trust_file_given_as: str = "trust file"

    def ssl_context(self) -> Any:
        """An SSL context trusting the CA certificates of `trust_file`, or True: the system's."""
        import ssl

        if self.trust_file is None:
            return True
        try:
            return ssl.create_default_context(cafile=self.trust_file)
        except (OSError, ssl.SSLError) as error:
            raise errors.InvalidArgumentError(self.trust_file_given_as, self.trust_file, "a readable file of PEM "
                                              "CA certificates", str(error)) from None


def _part(name: str) -> str:
    return quote(name, safe="")


def _topic_path(topic: str) -> str:
    name = TopicName.parse(topic)
    return "/".join(_part(p) for p in name.path_parts())


def _namespace_path(namespace: str) -> str:
    name = NamespaceName.parse(namespace)
    return f"{_part(name.tenant)}/{_part(name.namespace)}"


def _names_an_error(response: httpx.Response) -> bool:
    """Whether the refusal's body names one of the local API's exceptions (not an authorization refusal)."""
    kind = _body(response).get("error")
    return kind in _ERRORS or kind in _ARGUMENT_ERRORS


def _unauthorized(response: httpx.Response, how_to_give_token: str) -> errors.NotAuthorizedError:
    """A 401 or 403 as one line: the server's reason, and how to give a token."""
    reason = _body(response).get("reason")
    what = "needs a token" if response.status_code == 401 else "refused this token's role"
    return errors.NotAuthorizedError(f"the server {what} ({response.status_code}: "
                                     f"{reason or response.reason_phrase}): give a token of a role allowed to with "
                                     f"{how_to_give_token}")


class Http:
    """Requests to one server; each answer's JSON, or the refusal raised as the local API would raise it."""

    def __init__(self, url: str, credentials: Credentials) -> None:
        self.url = url.rstrip("/")
        self.credentials = credentials
        token = credentials.token
        self.client = httpx.Client(base_url=self.url, timeout=TIMEOUT_S, verify=credentials.ssl_context(),
                                   headers={"Authorization": f"Bearer {token.strip()}"} if token else None)

    def call(self, method: str, path: str, body: Any = None, *, content: bytes | None = None,
             params: Mapping[str, str] | None = None, raw: bool = False) -> Any:
        try:
            response = self.client.request(method, path, params=params, content=content if body is None else
                                           json.dumps(body).encode(),
                                           headers={"Content-Type": "application/json"})
        except httpx.HTTPError as error:
            untrusted = "CERTIFICATE_VERIFY_FAILED" in str(error)
            hint = (f" (give the CA certificates that sign the server's with {self.credentials.trust_file_given_as})"
                    if untrusted else "")
            raise errors.ServerUnreachableError(f"cannot reach the seglog server at {self.url}: {error}{hint}") \
                from None
        # (a 403 naming seglog's error is a refusal of the request itself)
        if response.status_code == 401 or (response.status_code == 403 and not _names_an_error(response)):
            raise _unauthorized(response, self.credentials.how_to_give_token)
        if response.status_code >= 400:
            raise _refusal(response)
        if raw:
            return response.text
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    def close(self) -> None:
        self.client.close()


class RemotePolicyLevel:
    """PolicyLevel's getters and setters over Pulsar's policy paths (Pulsar's units on the wire)."""

    def __init__(self, http: Http) -> None:
        self._http = http

    def _base(self, name: str) -> str:
        raise NotImplementedError

    def set_retention(self, name: str, *, size: Any, time: Any) -> None:
        retention = Retention.parse(size=size, time=time)  # refused here as locally, before any request
        self._http.call("POST", f"{self._base(name)}/retention", retention.to_admin())

    def get_retention(self, name: str) -> dict[str, int] | None:
        return self._http.call("GET", f"{self._base(name)}/retention")

    def remove_retention(self, name: str) -> None:
        self._http.call("DELETE", f"{self._base(name)}/retention")

    def set_message_ttl(self, name: str, seconds: Any) -> None:
        self._set_ttl(name, parse_ttl(seconds) // SECOND_MS)

    def _set_ttl(self, name: str, seconds: int) -> None:
        raise NotImplementedError

    def get_message_ttl(self, name: str) -> int | None:
        return self._http.call("GET", f"{self._base(name)}/messageTTL")

    def remove_message_ttl(self, name: str) -> None:
        self._http.call("DELETE", f"{self._base(name)}/messageTTL")

    def set_backlog_quota(self, name: str, limit: Any = None, limit_time: Any = None,
                          policy: str = "producer_request_hold", type: str = "destination_storage") -> None:  # noqa: A002
        quota = BacklogQuota.parse(type=type, limit=limit, limit_time=limit_time, policy=policy)
        body = ({"limitSize": quota.limit, "policy": quota.policy} if type == "destination_storage"
                else {"limitTime": quota.limit // SECOND_MS, "policy": quota.policy})
        self._http.call("POST", f"{self._base(name)}/backlogQuota", body, params={"backlogQuotaType": type})

    def get_backlog_quotas(self, name: str) -> dict[str, dict[str, Any]]:
        quotas = self._http.call("GET", f"{self._base(name)}/backlogQuotaMap")
        return {t: ({"limit": q["limitSize"]} if t == "destination_storage" else {"limitTime": q["limitTime"]})
                | {"policy": q["policy"]} for t, q in quotas.items()}

    _DEDUPLICATION = "deduplication"  # Pulsar's path under the level's; a topic's differs

    def set_deduplication(self, name: str, enabled: bool) -> None:
        if not isinstance(enabled, bool):
            raise errors.InvalidArgumentError("enabled", enabled, "True or False")
        self._http.call("POST", f"{self._base(name)}/{self._DEDUPLICATION}", enabled)

    def get_deduplication(self, name: str) -> bool | None:
        return self._http.call("GET", f"{self._base(name)}/{self._DEDUPLICATION}")

    def remove_deduplication(self, name: str) -> None:
        self._http.call("DELETE", f"{self._base(name)}/{self._DEDUPLICATION}")

    _SET_THRESHOLD = "POST"  # Pulsar's method to set a topic's compaction threshold; a namespace's differs

    def set_compaction_threshold(self, name: str, threshold: Any) -> None:
        self._http.call(self._SET_THRESHOLD, f"{self._base(name)}/compactionThreshold",
                        parse_compaction_threshold(threshold))

    def get_compaction_threshold(self, name: str) -> int | None:
        return self._http.call("GET", f"{self._base(name)}/compactionThreshold")

    def remove_compaction_threshold(self, name: str) -> None:
        self._http.call("DELETE", f"{self._base(name)}/compactionThreshold")

    def remove_backlog_quota(self, name: str, type: str = "destination_storage") -> None:  # noqa: A002
        if type not in QUOTA_TYPES:
            raise errors.InvalidArgumentError("type", type, " or ".join(map(repr, QUOTA_TYPES)))
        self._http.call("DELETE", f"{self._base(name)}/backlogQuota", params={"backlogQuotaType": type})


class RemoteClusters:
    def __init__(self, http: Http) -> None:
        self._http = http

    def _path(self, name: str) -> str:
        return f"/admin/v2/clusters/{_part(validate_part(name, kind='cluster name'))}"

    def create(self, name: str, data: Mapping[str, Any] | None = None) -> None:
        self._http.call("PUT", self._path(name), check_cluster_data(data))

    def list(self) -> list[str]:
        return self._http.call("GET", "/admin/v2/clusters")

    def get(self, name: str) -> dict[str, Any]:
        return self._http.call("GET", self._path(name))

    def update(self, name: str, data: Mapping[str, Any]) -> None:
        self._http.call("POST", self._path(name), check_cluster_data(data))

    def delete(self, name: str) -> None:
        self._http.call("DELETE", self._path(name))


class RemoteTenants:
    def __init__(self, http: Http) -> None:
        self._http = http

    def create(self, name: str, allowed_clusters: list[str] | None = None, *,
               admin_roles: list[str] | None = None) -> None:
        validate_part(name, kind="tenant name")
        self._http.call("PUT", f"/admin/v2/tenants/{_part(name)}", {"adminRoles": admin_roles or [],
                                                                     "allowedClusters": allowed_clusters})

    def update(self, name: str, allowed_clusters: list[str] | None = None, *,
               admin_roles: list[str] | None = None) -> None:
        validate_part(name, kind="tenant name")
        self._http.call("POST", f"/admin/v2/tenants/{_part(name)}", {"adminRoles": admin_roles or [],
                                                                      "allowedClusters": allowed_clusters})

    def list(self) -> list[str]:
        return self._http.call("GET", "/admin/v2/tenants")

    def get(self, name: str) -> dict[str, Any]:
        return self._http.call("GET", f"/admin/v2/tenants/{_part(validate_part(name, kind='tenant name'))}")

    def delete(self, name: str) -> None:
        self._http.call("DELETE", f"/admin/v2/tenants/{_part(validate_part(name, kind='tenant name'))}")


class RemoteNamespaces(RemotePolicyLevel):
    _SET_THRESHOLD = "PUT"  # (Pulsar's method for a namespace's compaction threshold)

    def _base(self, name: str) -> str:
        return f"/admin/v2/namespaces/{_namespace_path(name)}"

    def _set_ttl(self, name: str, seconds: int) -> None:
        self._http.call("POST", f"{self._base(name)}/messageTTL", seconds)

    def create(self, name: str, *, clusters: list[str] | None = None,
               allowed_clusters: list[str] | None = None) -> None:
        policies = {key: sorted(cluster_names(value, argument)) for key, argument, value in
                    (("replication_clusters", "clusters", clusters),
                     ("allowed_clusters", "allowed_clusters", allowed_clusters)) if value is not None}
        self._http.call("PUT", self._base(name), policies or None)

    def set_clusters(self, name: str, clusters: list[str]) -> None:
        self._http.call("POST", f"{self._base(name)}/replication", sorted(cluster_names(clusters, "clusters")))

    def get_clusters(self, name: str) -> list[str]:
        return self._http.call("GET", f"{self._base(name)}/replication")

    def set_allowed_clusters(self, name: str, clusters: list[str]) -> None:
        self._http.call("POST", f"{self._base(name)}/allowedClusters",
                        sorted(cluster_names(clusters, "allowed_clusters")))

    def get_allowed_clusters(self, name: str) -> list[str]:
        return self._http.call("GET", f"{self._base(name)}/allowedClusters")

    def cascading_deletions(self, name: str, *, clusters: list[str] | None = None,
                            allowed_clusters: list[str] | None = None) -> dict[str, list[str]]:
        if (clusters is None) == (allowed_clusters is None):
            raise errors.InvalidArgumentError("clusters / allowed_clusters", None, "exactly one of them: the change "
                                              "asked about")
        params = ({"clusters": ",".join(sorted(cluster_names(clusters, "clusters")))} if clusters is not None else
                  {"allowedClusters": ",".join(sorted(cluster_names(allowed_clusters, "allowed_clusters")))})
        return self._http.call("GET", f"/seglog/v1/namespaces/{_namespace_path(name)}/cascading-deletions",
                               params=params)

    def list(self, tenant: str | None = None) -> list[str]:
        if tenant is not None:
            return self._http.call("GET", f"/admin/v2/namespaces/{_part(validate_part(tenant, kind='tenant name'))}")
        return [ns for t in self._http.call("GET", "/admin/v2/tenants")
                for ns in self._http.call("GET", f"/admin/v2/namespaces/{_part(t)}")]

    def delete(self, name: str) -> None:
        self._http.call("DELETE", self._base(name))

    def clear_backlog(self, name: str, subscription: str | None = None) -> None:
        path = f"{self._base(name)}/clearBacklog"
        self._http.call("POST", path if subscription is None else f"{path}/{_part(subscription)}")

    def grant_permission(self, name: str, role: str, actions: Sequence[str]) -> None:  # (`list`: a method here)
        self._http.call("POST", f"{self._base(name)}/permissions/{_part(role)}", list(actions))

    def revoke_permission(self, name: str, role: str) -> bool:
        had = role in self.permissions(name)
        self._http.call("DELETE", f"{self._base(name)}/permissions/{_part(role)}")
        return had

    def permissions(self, name: str) -> Any:
        return self._http.call("GET", f"{self._base(name)}/permissions")

    def policies(self, name: str) -> dict[str, Any]:
        return self._http.call("GET", self._base(name))

    def set_auto_topic_creation(self, name: str, allowed: bool, topic_type: str = "non-partitioned",
                                partitions: int | None = None) -> None:
        override = AutoTopicCreation.parse(allowed=allowed, topic_type=topic_type, partitions=partitions)
        self._http.call("POST", f"{self._base(name)}/autoTopicCreation", override.to_admin())

    def get_auto_topic_creation(self, name: str) -> dict[str, Any] | None:
        return self._http.call("GET", f"{self._base(name)}/autoTopicCreation")

    def remove_auto_topic_creation(self, name: str) -> None:
        self._http.call("DELETE", f"{self._base(name)}/autoTopicCreation")


@dataclass(frozen=True)
class PeekedMessage:
    """A message as the server's peek gives it: the attributes of seglog.Message that commands print."""
    partition: int
    offset: int
    timestamp: int
    event_time: int | None
    key: bytes | None
    value: bytes
    properties: dict[str, str] = field(default_factory=dict)


class RemoteTopics(RemotePolicyLevel):
    _DEDUPLICATION = "deduplicationEnabled"

    def _base(self, name: str) -> str:
        return f"/admin/v2/persistent/{_topic_path(name)}"

    def _seglog(self, name: str) -> str:
        return f"/seglog/v1/topics/{_topic_path(name)}"

    def _subscription(self, topic: str, subscription: str, pulsar: bool = True) -> str:
        if pulsar:
            return f"{self._base(topic)}/subscription/{_part(subscription)}"
        return f"{self._seglog(topic)}/subscriptions/{_part(subscription)}"

    def _set_ttl(self, name: str, seconds: int) -> None:
        self._http.call("POST", f"{self._base(name)}/messageTTL", params={"messageTTL": str(seconds)})

    def create(self, topic: str, partitions: int = 1, **topic_config: Any) -> dict[str, Any]:
        return self._http.call("PUT", self._seglog(topic), {"partitions": partitions,
                                                             "settings": topic_config})

    def delete(self, topic: str, force: bool = False) -> None:
        self._http.call("DELETE", self._seglog(topic), params={"force": "true"} if force else None)

    def describe(self, topic: str) -> dict[str, Any]:
        return self._http.call("GET", self._seglog(topic))

    def set_config(self, topic: str, **topic_config: Any) -> None:
        self._http.call("POST", f"{self._seglog(topic)}/settings", topic_config)

    def stats(self, topic: str) -> dict[str, Any]:
        """seglog's stats, with the `replication` section of Pulsar's TopicStats (the server's replicators)."""
        stats = self._http.call("GET", f"{self._seglog(topic)}/stats")
        pulsar = self.partitioned_stats(topic) if len(stats["partitions"]) > 1 else \
            self._http.call("GET", f"{self._base(topic)}/stats")
        stats["replication"] = pulsar["replication"]
        return stats

    def partitioned_stats(self, topic: str, *, per_partition: bool = False) -> dict[str, Any]:
        return self._http.call("GET", f"{self._base(topic)}/partitioned-stats",
                               params={"perPartition": str(per_partition).lower()})

    def internal_stats(self, topic: str) -> dict[str, Any]:
        return self._http.call("GET", f"{self._seglog(topic)}/internal-stats")

    def explain_retention(self, topic: str) -> dict[str, Any]:
        return self._http.call("GET", f"{self._seglog(topic)}/explain")

    def compact(self, topic: str) -> dict[str, Any]:
        return self._http.call("POST", f"{self._seglog(topic)}/compaction")

    def compaction_status(self, topic: str) -> dict[str, Any]:
        return self._http.call("GET", f"{self._base(topic)}/compaction")

    def update_partitions(self, topic: str, partitions: int) -> None:
        self._http.call("POST", f"{self._base(topic)}/partitions", partitions)

    def subscriptions(self, topic: str) -> list[str]:
        return self._http.call("GET", f"{self._base(topic)}/subscriptions")

    def create_subscription(self, topic: str, subscription: str, offsets: Mapping[int, int] | str = "latest") -> None:
        validate_subscription_name(subscription)
        body = offsets if isinstance(offsets, str) else {"offsets": {str(p): o for p, o in offsets.items()}}
        self._http.call("PUT", self._subscription(topic, subscription, pulsar=False), body)

    def unsubscribe(self, topic: str, subscription: str, force: bool = False) -> None:
        self._http.call("DELETE", self._subscription(topic, subscription),
                        params={"force": "true"} if force else None)

    def reset_cursor_to_time(self, topic: str, subscription: str, timestamp: int) -> bool:
        self._http.call("POST", f"{self._subscription(topic, subscription, pulsar=False)}/reset",
                        {"timestamp": timestamp})
        return True

    def reset_cursor(self, topic: str, subscription: str, offsets: Mapping[int, int]) -> bool:
        self._http.call("POST", f"{self._subscription(topic, subscription, pulsar=False)}/reset",
                        {"offsets": {str(p): o for p, o in offsets.items()}})
        return True

    def ack_cumulative(self, topic: str, subscription: str, offsets: Mapping[int, int]) -> bool:
        try:
            self._http.call("POST", f"{self._subscription(topic, subscription, pulsar=False)}/ack-cumulative",
                            {"offsets": {str(p): o for p, o in offsets.items()}})
        except errors.ConsumerBusyError:
            return False  # (as the local API answers while another process consumes the subscription)
        return True

    def offsets(self, topic: str, *, read_compacted: bool = False, timestamp: int | None = None
                ) -> list[dict[str, int]]:
        params = {"readCompacted": "true" if read_compacted else "false"}
        if timestamp is not None:
            params["timestamp"] = str(timestamp)
        return self._http.call("GET", f"{self._seglog(topic)}/offsets", params=params)

    def skip(self, topic: str, subscription: str, count: int) -> int:
        path = f"{self._subscription(topic, subscription, pulsar=False)}/skip/{count}"
        return self._http.call("POST", path)["skipped"]

    def expire_messages(self, topic: str, subscription: str, seconds: Any) -> int:
        from seglog.units import parse_duration
        ms = parse_duration(seconds, argument="expire time", unit="s")
        path = f"{self._subscription(topic, subscription, pulsar=False)}/expire/{-(-ms // SECOND_MS)}"
        return self._http.call("POST", path)["expired"]

    def peek_messages(self, topic: str, subscription: str, count: int = 1) -> list[PeekedMessage]:
        found = self._http.call("GET", f"{self._subscription(topic, subscription, pulsar=False)}/peek",
                                params={"count": str(count)})
        return [PeekedMessage(m["partition"], m["offset"], m["timestamp"], m["eventTime"],
                              None if m["key"] is None else base64.b64decode(m["key"]), base64.b64decode(m["value"]),
                              m["properties"]) for m in found]

    def clear_backlog(self, topic: str, subscription: str | None = None) -> None:
        if subscription is None:
            for name in self.subscriptions(topic):
                self._http.call("POST", f"{self._subscription(topic, name)}/skip_all")
            return
        self._http.call("POST", f"{self._subscription(topic, subscription)}/skip_all")


    def set_replicated_subscription_status(self, topic: str, subscription: str, enabled: bool, *,
                                           partition: int | None = None) -> None:
        if not isinstance(enabled, bool):
            raise errors.InvalidArgumentError("enabled", enabled, "True or False")
        self._http.call("POST", self._replicated_status(topic, subscription, partition), enabled)

    def get_replicated_subscription_status(self, topic: str, subscription: str, *,
                                           partition: int | None = None) -> dict[str, bool]:
        return self._http.call("GET", self._replicated_status(topic, subscription, partition))

    def _replicated_status(self, topic: str, subscription: str, partition: int | None) -> str:
        """The path of replicatedSubscriptionStatus, on the topic or on its partition by Pulsar's name."""
        named = topic if partition is None else f"{TopicName.parse(topic)}-partition-{partition}"
        return f"{self._subscription(named, validate_subscription_name(subscription))}/replicatedSubscriptionStatus"

    def set_replication_clusters(self, topic: str, clusters: list[str], *, is_global: bool = False) -> None:
        self._http.call("POST", f"{self._base(topic)}/replication", sorted(cluster_names(clusters, "clusters")),
                        params={"isGlobal": "true"} if is_global else None)

    def get_replication_clusters(self, topic: str, *, applied: bool = False,
                                 is_global: bool = False) -> list[str] | None:
        return self._http.call("GET", f"{self._base(topic)}/replication",
                               params={"applied": str(applied).lower(), "isGlobal": str(is_global).lower()})

    def remove_replication_clusters(self, topic: str, *, is_global: bool = False) -> None:
        self._http.call("DELETE", f"{self._base(topic)}/replication",
                        params={"isGlobal": "true"} if is_global else None)

    def list_with_settings(self) -> list[dict[str, Any]]:
        return self._http.call("GET", "/seglog/v1/topics")

    # after every method annotated with list[...]: in the class, `list` is this method from here on

    def list(self) -> list[str]:
        return [t["name"] for t in self.list_with_settings()]


class RemoteSchemas:
    """AdminSchemas on a server: Pulsar's schema routes, PostSchemaPayload out and GetSchemaResponse back, and
    the schema policies of namespaces and topics."""

    def __init__(self, http: Http) -> None:
        self._http = http

    def _path(self, topic: str) -> str:
        return f"/admin/v2/schemas/{_topic_path(topic)}"

    def _post(self, topic: str, route: str, type: str, schema: str | bytes,  # noqa: A002
              properties: Mapping[str, str] | None) -> Any:
        """POST a PostSchemaPayload to one of the topic's schema routes."""
        payload = {"type": type, "schema": schema.decode() if isinstance(schema, bytes) else schema,
                   "properties": dict(properties or {})}
        return self._http.call("POST", f"{self._path(topic)}/{route}", payload)

    def get(self, topic: str, version: int | None = None) -> dict[str, Any]:
        return self._http.call("GET", f"{self._path(topic)}/schema" + ("" if version is None else f"/{version}"))

    def versions(self, topic: str) -> list[dict[str, Any]]:
        return self._http.call("GET", f"{self._path(topic)}/schemas")["getSchemaResponses"]

    def create(self, topic: str, type: str, schema: str | bytes = "",  # noqa: A002  (Pulsar's field name)
               properties: Mapping[str, str] | None = None) -> int:
        return self._post(topic, "schema", type, schema, properties)["version"]

    def delete(self, topic: str, *, force: bool = False) -> int | None:
        return self._http.call("DELETE", f"{self._path(topic)}/schema",
                               params={"force": "true"} if force else None)["version"]

    def compatibility(self, topic: str, type: str, schema: str | bytes = "",  # noqa: A002
                      properties: Mapping[str, str] | None = None) -> dict[str, Any]:
        return self._post(topic, "compatibility", type, schema, properties)

    def version_of(self, topic: str, type: str, schema: str | bytes = "",  # noqa: A002
                   properties: Mapping[str, str] | None = None) -> int:
        return self._post(topic, "version", type, schema, properties)["version"]

    def _namespace(self, namespace: str) -> str:
        return f"/admin/v2/namespaces/{_namespace_path(namespace)}"

    def _topic(self, topic: str) -> str:
        return f"/admin/v2/persistent/{_topic_path(topic)}"

    def get_compatibility_strategy(self, namespace: str) -> str:
        return self._http.call("GET", f"{self._namespace(namespace)}/schemaCompatibilityStrategy")

    def set_compatibility_strategy(self, namespace: str, strategy: str) -> None:
        self._http.call("PUT", f"{self._namespace(namespace)}/schemaCompatibilityStrategy",
                        checked_strategy(strategy) or UNDEFINED)

    def get_topic_compatibility_strategy(self, topic: str, *, applied: bool = False) -> str | None:
        return self._http.call("GET", f"{self._topic(topic)}/schemaCompatibilityStrategy",
                               params={"applied": str(applied).lower()})

    def set_topic_compatibility_strategy(self, topic: str, strategy: str | None) -> None:
        strategy = None if strategy is None else checked_strategy(strategy)
        if strategy is None:
            self._http.call("DELETE", f"{self._topic(topic)}/schemaCompatibilityStrategy")
        else:
            self._http.call("PUT", f"{self._topic(topic)}/schemaCompatibilityStrategy", strategy)

    def get_allow_auto_update(self, namespace: str) -> bool:
        return self._http.call("GET", f"{self._namespace(namespace)}/isAllowAutoUpdateSchema")

    def set_allow_auto_update(self, namespace: str, allowed: bool) -> None:
        self._http.call("POST", f"{self._namespace(namespace)}/isAllowAutoUpdateSchema", allowed)

    def get_validation_enforced(self, namespace: str) -> bool:
        return self._http.call("GET", f"{self._namespace(namespace)}/schemaValidationEnforced")

    def set_validation_enforced(self, namespace: str, enforced: bool) -> None:
        self._http.call("POST", f"{self._namespace(namespace)}/schemaValidationEnforced", enforced)

    def get_topic_validation_enforced(self, topic: str, *, applied: bool = False) -> bool | None:
        return self._http.call("GET", f"{self._topic(topic)}/schemaValidationEnforced",
                               params={"applied": str(applied).lower()})

    def set_topic_validation_enforced(self, topic: str, enforced: bool | None) -> None:
        if enforced is None:
            self._http.call("DELETE", f"{self._topic(topic)}/schemaValidationEnforced")
        else:
            self._http.call("POST", f"{self._topic(topic)}/schemaValidationEnforced", enforced)


class RemoteAdmin:
    """seglog.admin.api.Admin's surface, on a server: `clusters`, `tenants`, `namespaces`, `topics`, `schemas`,
    `run_maintenance`, `metrics`, `now_ms`."""

    def __init__(self, url: str, credentials: Credentials, *, argument: str = "url") -> None:
        """`argument`: the name of the option that gave `url`, as errors name it."""
        if not url.startswith(("http://", "https://")):
            raise errors.InvalidArgumentError(argument, url, "the server's HTTP URL, http://HOST:PORT or "
                                              "https://HOST:PORT (seglog serve prints it)")
        self._http = Http(url, credentials)
        self.clusters = RemoteClusters(self._http)
        self.tenants = RemoteTenants(self._http)
        self.namespaces = RemoteNamespaces(self._http)
        self.topics = RemoteTopics(self._http)
        self.schemas = RemoteSchemas(self._http)

    def run_maintenance(self) -> MaintenanceReport:
        report = self._http.call("POST", "/seglog/v1/maintenance")
        return MaintenanceReport([tuple(s) for s in report["deleted_segments"]], report["freed_bytes"],
                                 report["expired"], report["evicted"],
                                 [tuple(s) for s in report["skipped_partitions"]])

    def metrics(self) -> str:
        return self._http.call("GET", "/metrics", raw=True)

    def flight(self) -> dict[str, Any]:
        """Where the server's Arrow Flight port is: {"port": N, "tls": bool} (docs/SERVER.md, Flight)."""
        return self._http.call("GET", "/seglog/v1/flight")

    def now_ms(self) -> int:
        """This machine's clock (reset-cursor --time counts back from it)."""
        return int(time.time() * 1000)

    def close(self) -> None:
        self._http.close()

