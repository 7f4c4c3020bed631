"""The admin HTTP port. In this version it serves one route, `GET /admin/v2/brokers/health` → 200 `ok`, so
scripts can wait for the server; everything else is 404 with Pulsar's `{"reason": ...}` body. It is a few
lines on the standard library's asyncio streams: the admin REST API will bring a real HTTP layer with it."""

from __future__ import annotations

import asyncio
import json
import logging

logger = logging.getLogger("seglog.server")

MAX_HEAD = 16 * 1024  # request line and headers
HEAD_TIMEOUT_S = 10.0
HEALTH = "/admin/v2/brokers/health"


async def handle_http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
        if len(head) > MAX_HEAD:
            raise ValueError("request head too large")
        method, target, _version = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
        path = target.split("?", 1)[0]
        if path == HEALTH and method in ("GET", "HEAD"):
            status, body, kind = "200 OK", b"ok", "text/plain"
        else:
            status, kind = "404 Not Found", "application/json"
            body = json.dumps({"reason": f"{method} {path} is not served by this seglog version"}).encode()
        writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
                     "Connection: close\r\n\r\n".encode() + (b"" if method == "HEAD" else body))
        await writer.drain()
    except (asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError,
            ConnectionError) as error:
        logger.info("http: bad or incomplete request: %s", error)
        if not writer.is_closing():
            writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    finally:
        writer.close()
