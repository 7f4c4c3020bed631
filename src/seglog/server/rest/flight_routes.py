"""GET /seglog/v1/flight: where the Flight port of this server is (docs/SERVER.md, "Flight (Arrow data
port)"), for clients that know the HTTP URL only (the Spark connector's serviceUrl):

    {"port": 8815, "tls": false}

The client joins the host it reaches the HTTP port by with the port: `grpc://HOST:PORT`, or `grpc+tls://` when
`tls`. Any authenticated role may ask (rest/middleware.py)."""

from __future__ import annotations

from aiohttp import web

from seglog.server.rest.base import RestContext, Route, json_response

FLIGHT = "/seglog/v1/flight"


async def flight_port(request: web.Request, ctx: RestContext) -> web.Response:
    return json_response({"port": ctx.flight_port, "tls": ctx.flight_tls})


ROUTES = [
    Route("GET", FLIGHT, flight_port, 'Where the Flight port is: {"port": N, "tls": bool}.'),
]
