"""Health, metrics and the HTTP lookup (the client's `http://` service URL)."""

from __future__ import annotations

from aiohttp import web

from seglog.server.non_persistent_clients import look_up
from seglog.server.rest.base import RestContext, Route, json_response
from seglog.server.rest.errors import RestError
from seglog.server.rest.replication_metrics import replication_metrics_text


async def health(request: web.Request, ctx: RestContext) -> web.Response:
    return web.Response(text="ok", content_type="text/plain")


async def metrics(request: web.Request, ctx: RestContext) -> web.Response:
    text = await ctx.blocking(ctx.admin.metrics) + await ctx.blocking(replication_metrics_text, ctx)
    return web.Response(text=text, content_type="text/plain", charset="utf-8")


async def lookup(request: web.Request, ctx: RestContext) -> web.Response:
    """Where a topic is served: always this server (`brokerUrl`, `httpUrl`); a topic not created yet in an
    existing namespace too (producers create it), a missing namespace 404."""
    domain = request.match_info["domain"]
    if domain not in ("persistent", "non-persistent"):
        raise RestError(412, f"{domain}:// topics are not served: seglog serves persistent and non-persistent topics")
    info = request.match_info
    name = f"{domain}://{info['tenant']}/{info['namespace']}/{info['topic']}"
    if domain == "non-persistent":
        await look_up(ctx.service, ctx.blocking, name)
    else:
        await ctx.blocking(ctx.service.resolve, name, False)
    settings = ctx.service.settings
    return json_response({"brokerUrl": settings.broker_url, "brokerUrlTls": settings.broker_url_tls,
                          "httpUrl": ctx.http_url, "httpUrlTls": ctx.http_url_tls})


ROUTES = [
    Route("GET", "/admin/v2/brokers/health", health, "200 ok while the server serves."),
    Route("GET", "/metrics", metrics, "Every topic's stats in Prometheus' text format."),
    Route("GET", "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}", lookup,
          "The broker serving a topic: {brokerUrl, brokerUrlTls, httpUrl, httpUrlTls}.", (200, 404, 412)),
]
