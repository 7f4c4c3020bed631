"""The one place every HTTP request goes through: authentication (a later version checks the token here;
this one lets every request through), the handler, and the mapping of errors to Pulsar's statuses and
`{"reason": ...}` bodies (errors.py). aiohttp's own answers (no such route, method not allowed) get the same
JSON body."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from seglog.errors import SeglogError
from seglog.server.errors import ServerFailure
from seglog.server.rest.errors import RestError, error_body, status_of

logger = logging.getLogger("seglog.server")


def authenticate(request: web.Request) -> None:
    """Refuse a request that is not authenticated (RestError 401). No authentication yet: every request
    passes; the token check goes here."""


@web.middleware
async def dispatch(request: web.Request,
                   handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
    try:
        authenticate(request)
        return await handler(request)
    except RestError as error:
        return _error(error.status, error)
    except (SeglogError, ServerFailure) as error:
        return _error(status_of(error), error)
    except web.HTTPException as error:
        if error.status < 400:
            raise
        reason = {404: f"{request.method} {request.path} is not served by seglog (see GET /admin/v2/openapi.json)",
                  405: f"{request.method} is not allowed on {request.path}"}.get(error.status, error.reason)
        return _error(error.status, RestError(error.status, reason))
    except Exception as error:  # (answered 500; the server goes on)
        logger.exception("%s %s failed", request.method, request.path)
        return _error(500, error)


def _error(status: int, error: BaseException) -> web.Response:
    return web.json_response(error_body(error), status=status)
