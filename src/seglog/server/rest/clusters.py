"""/admin/v2/clusters: the clusters the data directory knows (Pulsar's ClusterData)."""

from __future__ import annotations

from aiohttp import web

from seglog.server.rest.base import RestContext, Route, json_body, json_response, no_content

CLUSTERS = "/admin/v2/clusters"
CLUSTER = "/admin/v2/clusters/{cluster}"
CLUSTER_DATA = ("ClusterData: serviceUrl (http://), serviceUrlTls (https://), brokerServiceUrl (pulsar://), "
                "brokerServiceUrlTls (pulsar+ssl://), authenticationPlugin (token) and authenticationParameters "
                "(token:<JWT> or file:<path>), peerClusterNames, ...")


async def list_clusters(request: web.Request, ctx: RestContext) -> web.Response:
    return json_response(await ctx.blocking(ctx.admin.clusters.list))


async def get_cluster(request: web.Request, ctx: RestContext) -> web.Response:
    return json_response(await ctx.blocking(ctx.admin.clusters.get, request.match_info["cluster"]))


async def create_cluster(request: web.Request, ctx: RestContext) -> web.Response:
    data = await json_body(request, CLUSTER_DATA, optional=True)
    await ctx.blocking(ctx.admin.clusters.create, request.match_info["cluster"], data)
    return no_content()


async def update_cluster(request: web.Request, ctx: RestContext) -> web.Response:
    data = await json_body(request, CLUSTER_DATA)
    await ctx.blocking(ctx.admin.clusters.update, request.match_info["cluster"], data)
    return no_content()


async def delete_cluster(request: web.Request, ctx: RestContext) -> web.Response:
    await ctx.blocking(ctx.admin.clusters.delete, request.match_info["cluster"])
    return no_content()


ROUTES = [
    Route("GET", CLUSTERS, list_clusters, "The clusters' names."),
    Route("GET", CLUSTER, get_cluster, "A cluster's ClusterData.", (200, 404, 412)),
    Route("PUT", CLUSTER, create_cluster, "Register a cluster.", (204, 400, 409, 412), CLUSTER_DATA),
    Route("POST", CLUSTER, update_cluster, "Replace a cluster's ClusterData.", (204, 400, 404, 412), CLUSTER_DATA),
    Route("DELETE", CLUSTER, delete_cluster, "Forget a cluster no tenant, namespace or topic names; 412 while one "
                                             "does.", (204, 404, 412)),
]
