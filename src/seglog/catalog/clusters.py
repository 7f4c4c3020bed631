"""Clusters and the replication policies that name them, as Pulsar's geo-replication has them (docs/SERVER.md,
"Geo-replication: clusters and policies"): ClusterData checked, the sets of clusters in force at each level,
and the rules a change must keep.

Levels, each within the one above it: a tenant's allowed clusters (empty or absent: every cluster), a
namespace's allowed clusters (PIP-321; unset: its clusters), a namespace's clusters (its topics' default
replication set; with neither set the namespace is local to its cluster), and a topic's replication clusters,
local (this cluster only) or global (meant for every cluster of its set). A data directory never served has no
local cluster yet: a namespace with neither set then has no clusters in force, the checks against its own
cluster are skipped, and every cluster named in a replication policy must have the URLs a remote one needs.

The checks read through a Metadata the caller holds in one transaction (Metadata.transaction) with the change
they allow, so a refused change leaves nothing half-written and no other process can slip a change between
the check and the write."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from seglog.catalog.metadata import Metadata
from seglog.catalog.policies import GlobalPolicies, Policies
from seglog.errors import ClusterInUseError, ClusterNotAllowedError, InvalidArgumentError, UnusableClusterError
from seglog.names import NamespaceName, TopicName, validate_part

# ClusterData's URLs and the scheme each takes (Pulsar's ClusterDataImpl checks the same); a URL may list
# several hosts after its scheme, comma-separated, as Pulsar accepts
URL_SCHEMES = {"serviceUrl": "http", "serviceUrlTls": "https", "brokerServiceUrl": "pulsar",
               "brokerServiceUrlTls": "pulsar+ssl"}
# the authentication a replicator can use toward a cluster: a token, given as Pulsar's AuthenticationToken
# takes it ('token:<JWT>', or 'file:<path>' of a file holding it)
TOKEN_PLUGINS = ("token", "org.apache.pulsar.client.impl.auth.AuthenticationToken")
TOKEN_PARAMETERS = ("token:", "file:")
AUTH_KEYS = ("authenticationPlugin", "authenticationParameters")


def check_cluster_data(data: Mapping[str, Any] | None) -> dict[str, Any]:
    """ClusterData checked: a JSON object; each URL empty or a URL of its scheme; peerClusterNames a list of
    cluster names; authenticationPlugin and authenticationParameters both given or both absent, a token as
    TOKEN_PLUGINS and TOKEN_PARAMETERS say. Other keys are kept as given (Pulsar has more than seglog uses)."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise InvalidArgumentError("cluster data", data, "a JSON object (Pulsar's ClusterData: serviceUrl, "
                                   "brokerServiceUrl, ...)")
    for key, scheme in URL_SCHEMES.items():
        url = data.get(key)
        if url is None or url == "":
            continue
        if not isinstance(url, str) or not url.startswith(f"{scheme}://") or url == f"{scheme}://":
            raise InvalidArgumentError(key, url, f"a URL {scheme}://HOST:PORT (or HOST1:PORT1,HOST2:PORT2), or "
                                                 "empty")
    peers = data.get("peerClusterNames")
    if peers is not None:
        if isinstance(peers, str) or not isinstance(peers, (list, tuple)):
            raise InvalidArgumentError("peerClusterNames", peers, "a list of cluster names")
        for peer in peers:
            validate_part(peer, kind="cluster name")
    plugin, parameters = (data.get(key) or None for key in AUTH_KEYS)
    if plugin is None and parameters is not None:
        raise InvalidArgumentError("authenticationParameters", parameters, "no parameters without an "
                                   f"authenticationPlugin ({' or '.join(TOKEN_PLUGINS)})")
    if plugin is not None:
        if plugin not in TOKEN_PLUGINS:
            raise InvalidArgumentError("authenticationPlugin", plugin, " or ".join(map(repr, TOKEN_PLUGINS)),
                                       detail="replication authenticates to other clusters with tokens")
        if not isinstance(parameters, str) or not any(parameters.startswith(prefix) and parameters != prefix
                                                      for prefix in TOKEN_PARAMETERS):
            raise InvalidArgumentError("authenticationParameters", parameters,
                                       "'token:<JWT>', or 'file:<path>' of a file holding the token")
    return dict(data)


def token_parameter(data: Mapping[str, Any]) -> tuple[str, str] | None:
    """('token', JWT) or ('file', path) of a cluster registered with a token (check_cluster_data's forms),
    else None: what a replicator authenticates to that cluster with."""
    plugin, parameters = (data.get(key) or None for key in AUTH_KEYS)
    if plugin is None or not isinstance(parameters, str):
        return None
    kind, _, value = parameters.partition(":")
    return kind, value.removeprefix("//") if kind == "file" else value


def full_cluster_data(stored: Mapping[str, Any]) -> dict[str, Any]:
    """ClusterData as stored, with every URL (empty when not given), peerClusterNames and the authentication
    keys (None when not given)."""
    return {**dict.fromkeys(URL_SCHEMES, ""), "peerClusterNames": None, **dict.fromkeys(AUTH_KEYS), **stored}


def _missing_urls(data: Mapping[str, Any]) -> list[str]:
    """The URLs replication to a cluster needs and its ClusterData lacks: an HTTP URL (to look topics up and
    create them) and a broker URL (to produce), each plain or TLS."""
    return [f"a {what} ({plain} or {tls})" for what, plain, tls in
            (("service URL", "serviceUrl", "serviceUrlTls"), ("broker service URL", "brokerServiceUrl",
                                                              "brokerServiceUrlTls"))
            if not data.get(plain) and not data.get(tls)]


def cluster_names(value: Any, argument: str) -> frozenset[str]:
    """A list of one or more cluster names, as a set (InvalidNameError for an invalid name)."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Collection) or not value:
        raise InvalidArgumentError(argument, value, "a list of one or more cluster names")
    return frozenset(validate_part(name, kind="cluster name") for name in value)


def _listed(clusters: Iterable[str]) -> str:
    return ", ".join(sorted(clusters)) or "none"


# the sets in force

def allowed_in_force(namespace: Policies, local_cluster: str | None) -> frozenset[str] | None:
    """The clusters a namespace's topics may reach: its allowed clusters, else its clusters, else its own
    cluster; None when it sets neither and the data directory has no cluster yet."""
    if namespace.allowed_clusters is not None:
        return namespace.allowed_clusters
    return clusters_in_force(namespace, local_cluster)


def clusters_in_force(namespace: Policies, local_cluster: str | None) -> frozenset[str] | None:
    """A namespace's replication set: its clusters, else its own cluster (None as allowed_in_force)."""
    if namespace.replication_clusters is not None:
        return namespace.replication_clusters
    return frozenset({local_cluster}) if local_cluster is not None else None


def applied_replication(local: Policies, global_: GlobalPolicies, namespace: Policies,
                        local_cluster: str | None) -> frozenset[str]:
    """A topic's replication set on this cluster: its local policy, else its global one, else its namespace's
    (OneWayReplicatorTest testPoliciesOverWrite); empty when nothing applies yet (no cluster)."""
    return _applied_level(local, global_, namespace, local_cluster)[1]


def _applied_level(local: Policies, global_: GlobalPolicies, namespace: Policies,
                   local_cluster: str | None) -> tuple[str, frozenset[str]]:
    """applied_replication, with the level that set it."""
    for level, clusters in (("local topic policy", local.replication_clusters),
                            ("global topic policy", global_.policies.replication_clusters)):
        if clusters is not None:
            return level, clusters
    return "namespace", clusters_in_force(namespace, local_cluster) or frozenset()


def leaves_topic(namespace: Policies, global_: GlobalPolicies, local: Policies | None, cluster: str) -> str | None:
    """Why `cluster` must not hold a topic (and deletes it when the clusters share their configuration: Pulsar's
    cascading deletion), or None when it may: outside the allowed clusters the namespace sets, whatever the
    topic's policies; else outside the topic's applied replication set (a policy that lists `cluster`, local or
    global, keeps the topic there against its namespace's clusters, and against the allowed clusters that follow
    them when the namespace sets none). `local`: the topic's local policy on `cluster`, None when unknown
    (another cluster's)."""
    if namespace.allowed_clusters is not None and cluster not in namespace.allowed_clusters:
        return f"{cluster} is not among the allowed clusters of its namespace ({_listed(namespace.allowed_clusters)})"
    level, clusters = _applied_level(local or Policies(), global_, namespace, cluster)
    return None if cluster in clusters else f"{cluster} is not among the replication clusters of its {level} " \
                                             f"({_listed(clusters)})"


# the rules

def check_registered(metadata: Metadata, clusters: Iterable[str], argument: str, *,
                     local_cluster: str | None, reachable: bool) -> None:
    """Every cluster registered, and with `reachable` every one but the local cluster registered with the URLs
    replication needs (every one before the data directory has a cluster: it cannot tell its own then);
    UnusableClusterError naming the first that is not."""
    given = sorted(clusters)
    registered = metadata.clusters()
    for cluster in given:
        if cluster not in registered:
            raise UnusableClusterError(argument, given, f"registered clusters: {_listed(registered)}",
                                       detail=f"cluster {cluster} is not registered (seglog clusters create "
                                              f"{cluster} --url ... --broker-url ...)")
        missing = _missing_urls(metadata.cluster_config(cluster)) if reachable and cluster != local_cluster else []
        if missing:
            raise UnusableClusterError(argument, given, "clusters registered with the URLs replication needs",
                                       detail=f"cluster {cluster} is registered without {' and '.join(missing)}, "
                                              f"which replication to it needs (seglog clusters update {cluster} "
                                              "--url http://HOST:PORT --broker-url pulsar://HOST:PORT)")


def check_namespace(metadata: Metadata, namespace: NamespaceName, policies: Policies, *, changed: str,
                    local_cluster: str | None) -> None:
    """A namespace's clusters and allowed clusters (`policies`) as Pulsar checks them where `changed`
    ('clusters' or 'allowed_clusters') was set: each cluster given registered and reachable (412), allowed by
    the tenant (403, Pulsar's words), and the clusters within the allowed clusters (400)."""
    given = policies.replication_clusters if changed == "clusters" else policies.allowed_clusters
    if given is None:
        return
    check_registered(metadata, given, changed, local_cluster=local_cluster, reachable=True)
    tenant_allows = metadata.tenant_config(namespace.tenant).get("allowed_clusters")
    # empty or absent: every cluster (Pulsar's geo-replication documentation)
    if tenant_allows and (outside := sorted(given - set(tenant_allows))):
        raise ClusterNotAllowedError(
            changed, sorted(given), f"clusters tenant {namespace.tenant} allows: {_listed(tenant_allows)}",
            detail=f"Cluster [{outside[0]}] is not in the list of allowed clusters list for tenant "
                   f"[{namespace.tenant}]")
    # a namespace that sets no clusters has this cluster's (PIP-321 adds it to the allowed clusters it creates)
    clusters, allowed = clusters_in_force(policies, local_cluster), policies.allowed_clusters
    if clusters is None or allowed is None or not (outside := sorted(clusters - allowed)):
        return
    if changed == "clusters":
        raise InvalidArgumentError("clusters", sorted(clusters), f"clusters among the namespace's allowed clusters: "
                                                                 f"{_listed(allowed)}",
                                   detail=f"cluster {outside[0]} is not in the allowed clusters of {namespace}")
    implicit = " (this cluster: the namespace sets none)" if policies.replication_clusters is None else ""
    raise InvalidArgumentError("allowed_clusters", sorted(allowed), f"clusters that include every cluster of the "
                                                                    f"namespace: {_listed(clusters)}",
                               detail=f"cluster {outside[0]}, one of the clusters of {namespace}{implicit}, would "
                                      "not be allowed")


def check_topic(metadata: Metadata, namespace: Policies, clusters: frozenset[str], *, is_global: bool,
                local_cluster: str | None) -> None:
    """A topic's replication clusters: registered and reachable (412), within its namespace's allowed clusters
    (400), and a local policy must keep the local cluster (400): without it this cluster would drop the topic,
    which only a global policy may decide (apache/pulsar#24351)."""
    check_registered(metadata, clusters, "clusters", local_cluster=local_cluster, reachable=True)
    allowed = allowed_in_force(namespace, local_cluster)
    if allowed is not None and (outside := sorted(clusters - allowed)):
        raise InvalidArgumentError("clusters", sorted(clusters), f"clusters among the namespace's allowed clusters: "
                                                                 f"{_listed(allowed)}",
                                   detail=f"cluster {outside[0]} is not in the namespace's allowed clusters")
    if not is_global and local_cluster is not None and local_cluster not in clusters:
        raise InvalidArgumentError("clusters", sorted(clusters), f"clusters that include this cluster, "
                                                                 f"{local_cluster}",
                                   detail=f"a local topic policy applies on {local_cluster} only, and without "
                                          f"{local_cluster} it would have this cluster drop the topic; set a "
                                          "global policy (--global) to replicate it elsewhere only")


def _namespace_uses(policies: Policies, local_cluster: str | None) -> frozenset[str]:
    """The clusters a namespace uses: its allowed clusters in force and its clusters."""
    return (allowed_in_force(policies, local_cluster) or frozenset()) | (policies.replication_clusters or frozenset())


def check_tenant_keeps(metadata: Metadata, tenant: str, allowed: list[str] | None, *,
                       local_cluster: str | None) -> None:
    """A tenant's new allowed clusters keep every cluster its namespaces use (ClusterInUseError, Pulsar's 412
    "Active namespaces", naming the namespace and the cluster). Empty or None allows every cluster."""
    if not allowed:
        return
    for namespace in metadata.namespaces(tenant):
        dropped = sorted(_namespace_uses(metadata.namespace_policies(namespace), local_cluster) - set(allowed))
        if dropped:
            raise ClusterInUseError(f"Active namespaces: namespace {namespace} uses cluster {dropped[0]}, which the "
                                    f"allowed clusters of tenant {tenant} would drop; remove it from the namespace's "
                                    "clusters and allowed clusters first")


def check_unused(metadata: Metadata, cluster: str, *, local_cluster: str | None) -> None:
    """Nothing uses `cluster` (ClusterInUseError naming what does): it is not the local cluster, and no tenant
    allows it by name, no namespace names it in its clusters or allowed clusters, no topic in its replication
    clusters, local or global."""
    if cluster == local_cluster:
        raise ClusterInUseError(f"cluster {cluster} is this data directory's own cluster (seglog serve --cluster "
                                f"{cluster}); it cannot be deleted")
    users = [f"tenant {tenant} (allowed clusters)" for tenant in metadata.tenants()
             if cluster in (metadata.tenant_config(tenant).get("allowed_clusters") or ())]
    for namespace in metadata.namespaces():
        policies = metadata.namespace_policies(namespace)
        users += _naming(f"namespace {namespace}", cluster, clusters=policies.replication_clusters,
                         allowed_clusters=policies.allowed_clusters)
    for topic in metadata.list_topics():
        name = TopicName.parse(topic)
        users += _naming(f"topic {topic}", cluster, local_replication_clusters=metadata.topic_policies(name)
                         .replication_clusters, global_replication_clusters=metadata.topic_global_policies(name)
                         .policies.replication_clusters)
    if users:
        raise ClusterInUseError(f"cluster {cluster} is still used by {'; '.join(users)}; remove it from them first")


def _naming(user: str, cluster: str, **sets: frozenset[str] | None) -> list[str]:
    """['namespace x (clusters, allowed clusters)'] when the sets named so hold `cluster`, else []."""
    which = [what.replace("_", " ") for what, named in sets.items() if named is not None and cluster in named]
    return [f"{user} ({', '.join(which)})"] if which else []
