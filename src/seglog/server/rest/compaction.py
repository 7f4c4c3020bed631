"""/admin/v2/persistent/{tenant}/{namespace}/{topic}/compaction: Pulsar's topic compaction on request
(docs/LIFECYCLE.md, Compaction). PUT starts one and answers 204 at once, as Pulsar's broker does: the request
marks the topic RUNNING (Compactor.begin), so a GET right after it says so, and the compaction runs in the
server's thread pool; a PUT while one runs is 409 with Pulsar's reason. GET answers Pulsar's
LongRunningProcessStatus, `{"status": "NOT_RUN"|"RUNNING"|"SUCCESS"|"ERROR", "lastError": "..."}`.

A partitioned topic's name compacts every partition, as Pulsar's broker asks each partition to; a partition's
name (`NAME-partition-i`) names its topic too: seglog keeps one compaction status a topic, so a partition's
compaction is its topic's (docs/SERVER.md). Both need the tenant's admin, as Pulsar's TopicOperation.COMPACT
does (middleware.py)."""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from seglog.catalog.topics import TopicRef
from seglog.lifecycle.compaction import CompactionRunningError
from seglog.names import TopicName
from seglog.server.rest.base import RestContext, Route, json_response, no_content, partition_named, topic_of
from seglog.server.rest.errors import RestError
from seglog.server.rest.topics import TOPIC

logger = logging.getLogger("seglog.server")

COMPACTION = f"{TOPIC}/compaction"
ALREADY_RUNNING = "Compaction already in progress"  # Pulsar's reason for the 409 (AlreadyRunningException)


def _begin(ctx: RestContext, topic: TopicName) -> TopicRef:
    """The topic the path names, marked RUNNING; 409 while a compaction of it runs (blocking)."""
    name, _ = partition_named(ctx, topic)
    ref = ctx.broker.topic(name)
    try:
        ctx.broker.compactor.begin(ref)
    except CompactionRunningError:
        raise RestError(409, ALREADY_RUNNING) from None
    return ref


def _run(ctx: RestContext, ref: TopicRef) -> None:
    """The compaction itself, in the thread pool: its outcome is the topic's status (ERROR with the
    failure's text as lastError), which GET answers; the server's log keeps the traceback."""
    try:
        ctx.broker.compactor.run(ref)
    except Exception:
        logger.warning("the compaction of %s failed", ref.name, exc_info=True)


async def trigger(request: web.Request, ctx: RestContext) -> web.Response:
    ref = await ctx.blocking(_begin, ctx, topic_of(request))
    ctx.executor.submit(_run, ctx, ref)
    return no_content()


async def status(request: web.Request, ctx: RestContext) -> web.Response:
    topic = topic_of(request)

    def answer() -> dict[str, Any]:
        name, _ = partition_named(ctx, topic)
        return ctx.admin.topics.compaction_status(str(name))
    return json_response(await ctx.blocking(answer))


ROUTES = [
    Route("PUT", COMPACTION, trigger, "Start a compaction of the topic (every partition; a partition's name "
                                      "compacts its topic too); answered at once, 409 while one runs.",
          (204, 404, 409, 412)),
    Route("GET", COMPACTION, status, 'The last compaction\'s status: {"status": NOT_RUN|RUNNING|SUCCESS|ERROR, '
                                     '"lastError": "..."}.', (200, 404, 412)),
]
