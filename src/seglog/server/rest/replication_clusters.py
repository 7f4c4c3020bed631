"""Geo-replication's clusters under the namespace and topic paths (docs/SERVER.md, "Geo-replication: clusters
and policies"): a namespace's clusters (`…/replication`, pulsar-admin set-clusters) and allowed clusters
(`…/allowedClusters`, PIP-321), a topic's replication clusters, local or global (`?isGlobal=true`). Bodies and
answers are JSON lists of cluster names, as in Pulsar; the admin API checks them (400, 403, 412 by the error)."""

from __future__ import annotations

from aiohttp import web

from seglog.server.rest.base import (
    RestContext,
    Route,
    json_body,
    json_response,
    namespace_of,
    no_content,
    query_flag,
    topic_of,
)

NAMESPACE = "/admin/v2/namespaces/{tenant}/{namespace}"
TOPIC = "/admin/v2/persistent/{tenant}/{namespace}/{topic}"
CLUSTERS = 'a JSON list of one or more cluster names: ["us-east", "us-west"]'


async def get_clusters(request: web.Request, ctx: RestContext) -> web.Response:
    return json_response(await ctx.blocking(ctx.admin.namespaces.get_clusters, namespace_of(request)))


async def set_clusters(request: web.Request, ctx: RestContext) -> web.Response:
    name = namespace_of(request)
    await ctx.blocking(ctx.admin.namespaces.set_clusters, name, await json_body(request, CLUSTERS))
    return no_content()


async def get_allowed_clusters(request: web.Request, ctx: RestContext) -> web.Response:
    return json_response(await ctx.blocking(ctx.admin.namespaces.get_allowed_clusters, namespace_of(request)))


async def set_allowed_clusters(request: web.Request, ctx: RestContext) -> web.Response:
    name = namespace_of(request)
    await ctx.blocking(ctx.admin.namespaces.set_allowed_clusters, name, await json_body(request, CLUSTERS))
    return no_content()


async def get_topic_clusters(request: web.Request, ctx: RestContext) -> web.Response:
    topic = str(topic_of(request))
    applied, is_global = query_flag(request, "applied"), query_flag(request, "isGlobal")
    return json_response(await ctx.blocking(ctx.admin.topics.get_replication_clusters, topic, applied=applied,
                                            is_global=is_global))


async def set_topic_clusters(request: web.Request, ctx: RestContext) -> web.Response:
    topic = str(topic_of(request))
    is_global = query_flag(request, "isGlobal")
    clusters = await json_body(request, CLUSTERS)
    await ctx.blocking(ctx.admin.topics.set_replication_clusters, topic, clusters, is_global=is_global)
    return no_content()


async def remove_topic_clusters(request: web.Request, ctx: RestContext) -> web.Response:
    topic = str(topic_of(request))
    await ctx.blocking(ctx.admin.topics.remove_replication_clusters, topic, is_global=query_flag(request, "isGlobal"))
    return no_content()


ROUTES = [
    Route("GET", f"{NAMESPACE}/replication", get_clusters, "The namespace's clusters (those set, else this cluster).",
          (200, 404, 412)),
    Route("POST", f"{NAMESPACE}/replication", set_clusters, "Set the clusters the namespace's topics replicate "
                                                             "among.", (204, 400, 403, 404, 412), CLUSTERS),
    Route("GET", f"{NAMESPACE}/allowedClusters", get_allowed_clusters, "The clusters the namespace's topics may "
                                                                       "reach (those set, else its clusters).",
          (200, 404, 412)),
    Route("POST", f"{NAMESPACE}/allowedClusters", set_allowed_clusters, "Set the clusters the namespace's topics "
                                                                        "may reach (PIP-321).",
          (204, 400, 403, 404, 412), CLUSTERS),
    Route("GET", f"{TOPIC}/replication", get_topic_clusters, "The topic's local (or with isGlobal=true, global) "
                                                             "replication clusters, null when unset; with "
                                                             "applied=true, the set in force.",
          (200, 400, 404, 412), query=("applied", "isGlobal")),
    Route("POST", f"{TOPIC}/replication", set_topic_clusters, "Set the topic's local (or global) replication "
                                                              "clusters.", (204, 400, 404, 412), CLUSTERS,
          query=("isGlobal",)),
    Route("DELETE", f"{TOPIC}/replication", remove_topic_clusters, "Remove the topic's local (or global) "
                                                                   "replication clusters.", (204, 400, 404, 412),
          query=("isGlobal",)),
]
