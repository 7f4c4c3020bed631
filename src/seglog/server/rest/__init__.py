"""The HTTP port of `seglog serve` (aiohttp, on the server's event loop beside the binary protocol): Pulsar's
admin REST API (/admin/v2), the HTTP lookup (/lookup/v2), /metrics, seglog's own routes (/seglog/v1) and
the OpenAPI document of all of them (GET /admin/v2/openapi.json), made from the route table below so it
cannot drift from what is served.

One module per resource (clusters, tenants, namespaces, topics, compaction, non_persistent_topics, subscriptions,
policies, replication_clusters, brokers, seglog_routes, schemas, flight_routes), each a list of Routes; every
request goes through middleware.dispatch (authentication, then errors as Pulsar's statuses with `{"reason": ...}`
bodies). Handlers call seglog.admin's API in the thread pool (RestContext.blocking)."""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from seglog.server.rest import (
    brokers,
    clusters,
    compaction,
    flight_routes,
    namespaces,
    non_persistent_topics,
    replication_clusters,
    schemas,
    seglog_routes,
    subscriptions,
    tenants,
    topics,
)
from seglog.server.rest.base import CONTEXT, RestContext, Route, json_response, wrap
from seglog.server.rest.middleware import dispatch
from seglog.version import __version__

OPENAPI = "/admin/v2/openapi.json"
_STATUS_TEXT = {200: "OK", 204: "No Content", 400: "Invalid value", 403: "Not allowed", 404: "Not found",
                405: "Not supported",
                409: "Already exists, or not empty", 412: "Precondition failed: an invalid name, or in use",
                422: "Invalid schema definition", 503: "The server is stopping"}


async def _openapi(request: web.Request, ctx: RestContext) -> web.Response:
    return json_response(openapi())


ROUTES: list[Route] = [
    *brokers.ROUTES, *clusters.ROUTES, *tenants.ROUTES, *namespaces.ROUTES, *topics.ROUTES, *compaction.ROUTES,
    *non_persistent_topics.ROUTES, *replication_clusters.ROUTES, *subscriptions.ROUTES, *seglog_routes.ROUTES,
    *schemas.ROUTES, *flight_routes.ROUTES,
    Route("GET", OPENAPI, _openapi, "This document."),
]


def openapi() -> dict[str, Any]:
    """The OpenAPI 3 document of ROUTES."""
    paths: dict[str, dict[str, Any]] = {}
    for route in ROUTES:
        parameters = [{"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
                      for name in re.findall(r"{(\w+)}", route.path)]
        parameters += [{"name": name, "in": "query", "required": False, "schema": {"type": "string"}}
                       for name in route.query]
        operation: dict[str, Any] = {
            "summary": route.summary, "operationId": f"{route.method.lower()}_{route.handler.__name__}",
            "parameters": parameters,
            "responses": {str(code): {"description": _STATUS_TEXT.get(code, str(code))} for code in route.codes}}
        if route.body is not None:
            operation["requestBody"] = {"description": route.body, "content": {"application/json": {}}}
        paths.setdefault(route.path, {})[route.method.lower()] = operation
    return {"openapi": "3.0.3", "info": {"title": "seglog serve: Pulsar's admin REST API and seglog's own",
                                         "version": __version__},
            "paths": paths}


def make_app(context: RestContext) -> web.Application:
    app = web.Application(middlewares=[dispatch], client_max_size=1 << 20)
    app[CONTEXT] = context
    for route in ROUTES:
        if route.method == "GET":  # and HEAD, as the health route always answered it
            app.router.add_get(route.path, wrap(route.handler))
        else:
            app.router.add_route(route.method, route.path, wrap(route.handler))
    return app


__all__ = ["OPENAPI", "ROUTES", "RestContext", "make_app", "openapi"]
