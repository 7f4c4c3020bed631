"""/seglog/v1: what seglog has beyond Pulsar's admin API, in seglog's own shapes, for `seglog --url` (each
admin command answers on a server as on a data directory) and for scripts:

    GET    /seglog/v1/topics                                    every topic with its settings (topic list)
    PUT    /seglog/v1/topics/{t}/{ns}/{topic}                   create with partitions and settings (topic create)
    GET    /seglog/v1/topics/{t}/{ns}/{topic}                   settings, offsets, storage, policies (describe)
    DELETE /seglog/v1/topics/{t}/{ns}/{topic}[?force=true]      delete, partitioned or not
    POST   /seglog/v1/topics/{t}/{ns}/{topic}/settings          change settings (topic update)
    GET    /seglog/v1/topics/{t}/{ns}/{topic}/stats|internal-stats|explain   seglog's stats
    POST   /seglog/v1/topics/{t}/{ns}/{topic}/compaction        compact now, answer what was done (topics compact)
    PUT    …/subscriptions/{sub}                                create at earliest, latest or {"offsets": {p: o}}
    POST   …/subscriptions/{sub}/reset                          {"offsets": {p: o}} or {"timestamp": ms}
    GET    /seglog/v1/topics/{t}/{ns}/{topic}/offsets[?readCompacted=true&timestamp=ms]   what a query plans with
    POST   …/subscriptions/{sub}/ack-cumulative                 {"offsets": {p: o}}: acknowledged up to each o
    POST   …/subscriptions/{sub}/skip/{n}, …/expire/{seconds}   answer {"skipped": n}, {"expired": n}
    GET    …/subscriptions/{sub}/peek?count=N                   the next N messages of each partition, as JSON
    POST   /seglog/v1/maintenance                               run the lifecycle rules now (maintenance)
    PUT    /seglog/v1/topics/{t}/{ns}/{topic}/global-policies   global topic policies another cluster replicates
    GET    /seglog/v1/namespaces/{t}/{ns}/cascading-deletions?clusters=a,b|allowedClusters=a,b
                                                                what that change would delete, by cluster

Pulsar's own paths (tenants, namespaces, policies, subscriptions, stats) serve everything else."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from aiohttp import web

from seglog.catalog.policies import GlobalPolicies
from seglog.server.rest.base import (
    RestContext,
    Route,
    int_of,
    json_body,
    json_response,
    namespace_of,
    no_content,
    path_int,
    query_flag,
    topic_of,
)
from seglog.server.rest.errors import RestError
from seglog.server.rest.messages import message_json
from seglog.server.rest.subscriptions import consumed_elsewhere, disconnect_consumers, subscription_of

TOPICS = "/seglog/v1/topics"
NAMESPACE = "/seglog/v1/namespaces/{tenant}/{namespace}"
TOPIC = "/seglog/v1/topics/{tenant}/{namespace}/{topic}"
SUBSCRIPTION = f"{TOPIC}/subscriptions/{{subscription}}"
CREATE = '{"partitions": N, "settings": {"segment_size": "64 MiB", ...}} (both optional)'
OFFSETS = '{"offsets": {"partition": offset, ...}}'
GLOBAL_POLICIES = ('{"policies": {"replication_clusters": [...]}, "updated_ms": ms, "origin": "cluster", '
                   '"partitions": N}: a topic\'s global policies as the cluster that changed them stamped them')


def _offsets(body: Any) -> dict[int, int]:
    offsets = body.get("offsets") if isinstance(body, dict) else None
    if not isinstance(offsets, dict) or not all(isinstance(p, str) and p.isdigit() for p in offsets):
        raise RestError(400, f"expected {OFFSETS}")
    return {int(p): o for p, o in offsets.items()}


async def list_topics(request: web.Request, ctx: RestContext) -> web.Response:
    return json_response(await ctx.blocking(ctx.admin.topics.list_with_settings))


async def create_topic(request: web.Request, ctx: RestContext) -> web.Response:
    topic = topic_of(request)
    body = await json_body(request, CREATE, optional=True) or {}
    if not isinstance(body, dict) or set(body) - {"partitions", "settings"} \
            or not isinstance(body.get("settings", {}), dict):
        raise RestError(400, f"expected {CREATE}")
    partitions = body.get("partitions", 1)
    created = await ctx.blocking(ctx.admin.topics.create, str(topic), partitions, **body.get("settings", {}))
    return json_response(created)


async def describe(request: web.Request, ctx: RestContext) -> web.Response:
    return json_response(await ctx.blocking(ctx.admin.topics.describe, str(topic_of(request))))


async def delete_topic(request: web.Request, ctx: RestContext) -> web.Response:
    await ctx.blocking(ctx.admin.topics.delete, str(topic_of(request)), query_flag(request, "force"))
    return no_content()


async def update_settings(request: web.Request, ctx: RestContext) -> web.Response:
    changes = await json_body(request, 'settings to change: {"segment_size": "64 MiB", ...}')
    if not isinstance(changes, dict) or not changes:
        raise RestError(400, 'expected settings to change: {"segment_size": "64 MiB", ...}')
    await ctx.blocking(ctx.admin.topics.set_config, str(topic_of(request)), **changes)
    return no_content()


def _view(method: str) -> Any:
    async def view(request: web.Request, ctx: RestContext) -> web.Response:
        return json_response(await ctx.blocking(getattr(ctx.admin.topics, method), str(topic_of(request))))
    view.__name__ = method
    return view


async def create_subscription(request: web.Request, ctx: RestContext) -> web.Response:
    topic, subscription = topic_of(request), subscription_of(request)
    body = await json_body(request, f'"earliest", "latest" or {OFFSETS}', optional=True)
    position = body if body in ("earliest", "latest") else "latest" if body is None else _offsets(body)
    await ctx.blocking(ctx.admin.topics.create_subscription, str(topic), subscription, position)
    return no_content()


async def reset(request: web.Request, ctx: RestContext) -> web.Response:
    topic, subscription = topic_of(request), subscription_of(request)
    body = await json_body(request, f'{OFFSETS} or {{"timestamp": ms}}')
    topics = ctx.admin.topics

    def move() -> None:
        if isinstance(body, dict) and "timestamp" in body:
            moved = topics.reset_cursor_to_time(str(topic), subscription, body["timestamp"])
        else:
            moved = topics.reset_cursor(str(topic), subscription, _offsets(body))
        if not moved:
            raise consumed_elsewhere(topic, subscription)
        disconnect_consumers(ctx, topic, subscription)
    await ctx.blocking(move)
    return no_content()


async def offsets(request: web.Request, ctx: RestContext) -> web.Response:
    text = request.query.get("timestamp")
    timestamp = None if text is None else int_of(int(text) if text.isdigit() else text, "timestamp", minimum=0)
    return json_response(await ctx.blocking(ctx.admin.topics.offsets, str(topic_of(request)),
                                            read_compacted=query_flag(request, "readCompacted"), timestamp=timestamp))


async def ack_cumulative(request: web.Request, ctx: RestContext) -> web.Response:
    topic, subscription = topic_of(request), subscription_of(request)
    body = await json_body(request, OFFSETS)
    if not await ctx.blocking(ctx.admin.topics.ack_cumulative, str(topic), subscription, _offsets(body)):
        raise consumed_elsewhere(topic, subscription)
    return no_content()


async def skip(request: web.Request, ctx: RestContext) -> web.Response:
    topic, subscription = topic_of(request), subscription_of(request)
    count = path_int(request, "count", "the number of messages to skip", minimum=1)
    return json_response({"skipped": await ctx.blocking(ctx.admin.topics.skip, str(topic), subscription, count)})


async def expire(request: web.Request, ctx: RestContext) -> web.Response:
    topic, subscription = topic_of(request), subscription_of(request)
    seconds = path_int(request, "seconds", "the expiry time in seconds")
    expired = await ctx.blocking(ctx.admin.topics.expire_messages, str(topic), subscription, seconds)
    return json_response({"expired": expired})


async def peek(request: web.Request, ctx: RestContext) -> web.Response:
    topic, subscription = topic_of(request), subscription_of(request)
    text = request.query.get("count", "1")
    count = int_of(int(text) if text.isdigit() else text, "count", minimum=1)
    messages = await ctx.blocking(ctx.admin.topics.peek_messages, str(topic), subscription, count)
    return json_response([message_json(m) for m in messages])


async def maintenance(request: web.Request, ctx: RestContext) -> web.Response:
    return json_response(asdict(await ctx.blocking(ctx.admin.run_maintenance)))


async def receive_global_policies(request: web.Request, ctx: RestContext) -> web.Response:
    """Global policies a replicating cluster sends (docs/REPLICATION.md, "Global topic policies"): applied if
    newer, the topic deleted here if they leave this cluster out; answers what was done."""
    topic = topic_of(request)
    body = await json_body(request, GLOBAL_POLICIES)
    if not isinstance(body, dict) or set(body) != {"policies", "updated_ms", "origin", "partitions"}:
        raise RestError(400, f"expected {GLOBAL_POLICIES}")
    try:
        received = GlobalPolicies.from_json(body)
    except (TypeError, ValueError, KeyError, AttributeError) as error:
        raise RestError(400, f"expected {GLOBAL_POLICIES}: {error}") from None
    partitions = int_of(body["partitions"], "partitions", minimum=1)
    outcome = await ctx.blocking(ctx.admin.topics.receive_global_policies, str(topic), received, partitions)
    return json_response({"outcome": outcome})


async def cascading_deletions(request: web.Request, ctx: RestContext) -> web.Response:
    given = {key: request.query[key].split(",") for key in ("clusters", "allowedClusters") if key in request.query}
    if len(given) != 1:
        raise RestError(400, "expected one query parameter: clusters=a,b or allowedClusters=a,b")
    return json_response(await ctx.blocking(ctx.admin.namespaces.cascading_deletions, namespace_of(request),
                                            clusters=given.get("clusters"),
                                            allowed_clusters=given.get("allowedClusters")))


ROUTES = [
    Route("GET", TOPICS, list_topics, "Every topic with its partitions and settings."),
    Route("PUT", TOPIC, create_topic, "Create a topic with partitions and settings (its tenant and namespace "
                                      "too, if needed).", (200, 400, 409, 412), CREATE),
    Route("GET", TOPIC, describe, "A topic's settings, offsets, storage and policies in force.", (200, 404, 412)),
    Route("DELETE", TOPIC, delete_topic, "Delete a topic, partitioned or not.", (204, 404, 412), query=("force",)),
    Route("POST", f"{TOPIC}/settings", update_settings, "Change a topic's settings.", (204, 400, 404, 412),
          "settings to change"),
    Route("GET", f"{TOPIC}/stats", _view("stats"), "seglog's topic stats.", (200, 404, 412)),
    Route("GET", f"{TOPIC}/internal-stats", _view("internal_stats"), "seglog's internal stats.", (200, 404, 412)),
    Route("POST", f"{TOPIC}/compaction", _view("compact"), "Compact the topic now and answer what was done per "
                                                             "partition; 409 while a compaction of it runs.",
          (200, 404, 409, 412)),
    Route("GET", f"{TOPIC}/explain", _view("explain_retention"), "Why each segment is kept, or when it goes.",
          (200, 404, 412)),
    Route("GET", f"{TOPIC}/offsets", offsets, "Each partition's earliest and end offsets, compaction horizon and, "
          "with ?timestamp=ms, first offset at or after that time: what a query plans a read with.",
          (200, 400, 404, 412), query=("readCompacted", "timestamp")),
    Route("PUT", SUBSCRIPTION, create_subscription, "Create a subscription.", (204, 400, 404, 409, 412),
          f'"earliest", "latest" or {OFFSETS}'),
    Route("POST", f"{SUBSCRIPTION}/reset", reset, "Move a subscription's cursors.", (204, 400, 404, 412),
          f'{OFFSETS} or {{"timestamp": ms}}'),
    Route("POST", f"{SUBSCRIPTION}/ack-cumulative", ack_cumulative, "Acknowledge each partition given up to and "
          "including its offset (a cursor already past it stays); 409 while another process consumes it.",
          (204, 400, 404, 409, 412), OFFSETS),
    Route("POST", f"{SUBSCRIPTION}/skip/{{count}}", skip, "Acknowledge the next N messages of each partition.",
          (200, 400, 404, 412)),
    Route("POST", f"{SUBSCRIPTION}/expire/{{seconds}}", expire, "Acknowledge the messages older than N seconds.",
          (200, 400, 404, 412)),
    Route("GET", f"{SUBSCRIPTION}/peek", peek, "The next N unacknowledged messages of each partition.",
          (200, 400, 404, 412), query=("count",)),
    Route("POST", "/seglog/v1/maintenance", maintenance, "Run the lifecycle rules now."),
    Route("PUT", f"{TOPIC}/global-policies", receive_global_policies, "Global topic policies replicated from "
          "another cluster: applied if newer; the topic deleted here if they leave this cluster out.",
          (200, 400, 404, 412), GLOBAL_POLICIES),
    Route("GET", f"{NAMESPACE}/cascading-deletions", cascading_deletions, "With a shared configuration store: the "
          "topics setting the namespace's clusters (or allowed clusters) would delete, by cluster.",
          (200, 400, 404, 412), query=("clusters", "allowedClusters")),
]
