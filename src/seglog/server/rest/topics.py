"""/admin/v2/persistent/{tenant}/{namespace}: persistent topics (create, list, delete, partitions, stats,
internal stats) and topic-level policies (policies.py).

A seglog topic with one partition is a non-partitioned Pulsar topic; with N > 1 it is a partitioned topic whose
partition i is `NAME-partition-i`. Create and delete on the one path refuse a topic of the other kind (405),
as Pulsar keeps the two apart."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from seglog.broker import MAX_PARTITIONS
from seglog.errors import NotFoundError, TopicNotFoundError
from seglog.names import TopicName
from seglog.server.rest.base import (
    RestContext,
    Route,
    int_of,
    json_body,
    json_response,
    namespace_of,
    no_content,
    query_flag,
    topic_of,
)
from seglog.server.rest.errors import RestError
from seglog.server.rest.policies import TOPIC_ROUTES
from seglog.server.rest.stats import internal_stats, partitioned_stats, topic_stats

PREFIX = "/admin/v2/persistent/{tenant}/{namespace}"
TOPIC = f"{PREFIX}/{{topic}}"
PARTITIONS_BODY = ('the partition count: a bare integer (4, or "4"), or {"partitions": N, "properties": {}} '
                   "(application/vnd.partitioned-topic-metadata+json)")


def require_namespace(ctx: RestContext, namespace: str) -> None:
    tenant = namespace.split("/")[0]
    try:
        namespaces = ctx.admin.namespaces.list(tenant)
    except NotFoundError:
        namespaces = []
    if namespace not in namespaces:
        raise RestError(404, f"namespace {namespace} does not exist")


def pulsar_topic_names(ctx: RestContext, namespace: str, *, partitioned: bool) -> list[str]:
    """`persistent://` names of the namespace's topics: the non-partitioned ones and every partition of the
    partitioned ones (Pulsar's topic list), or the partitioned ones (its partitioned list)."""
    names = []
    for name in ctx.broker.catalog.topic_names():
        if not name.startswith(f"{namespace}/"):
            continue
        try:
            ref = ctx.broker.topic(name)
        except TopicNotFoundError:
            continue  # (deleted since the names were read: a listing never fails for it)
        if partitioned:
            if ref.partitions > 1:
                names.append(f"persistent://{name}")
        else:
            names += [ref.pulsar_name(p) for p in range(ref.partitions)]
    return names


def partitions_of(ctx: RestContext, topic: TopicName) -> int:
    """The topic's partition count; 404 if there is no such topic."""
    return ctx.broker.topic(topic).partitions


async def list_topics(request: web.Request, ctx: RestContext) -> web.Response:
    namespace = namespace_of(request)

    def names() -> list[str]:
        require_namespace(ctx, namespace)
        return pulsar_topic_names(ctx, namespace, partitioned=False)
    return json_response(await ctx.blocking(names))


async def list_partitioned(request: web.Request, ctx: RestContext) -> web.Response:
    namespace = namespace_of(request)

    def names() -> list[str]:
        require_namespace(ctx, namespace)
        return pulsar_topic_names(ctx, namespace, partitioned=True)
    return json_response(await ctx.blocking(names))


def _create(ctx: RestContext, topic: TopicName, partitions: int) -> None:
    require_namespace(ctx, topic.namespace_name)
    ctx.broker.create_topic(str(topic), partitions, {})


async def create_topic(request: web.Request, ctx: RestContext) -> web.Response:
    topic = topic_of(request)
    properties = await json_body(request, "optional topic properties, a JSON object", optional=True)
    if properties is not None and not isinstance(properties, dict):
        raise RestError(400, "the body must be the topic's properties, a JSON object")
    if properties:
        raise RestError(400, f"topic properties are not kept by seglog; create the topic without them "
                             f"(given: {', '.join(sorted(properties))})")
    await ctx.blocking(_create, ctx, topic, 1)
    return no_content()


def _partition_count(body: Any) -> int:
    if isinstance(body, dict):
        unknown = set(body) - {"partitions", "properties"}
        if unknown or body.get("properties"):
            raise RestError(400, f"expected {PARTITIONS_BODY}; seglog keeps no topic properties")
        body = body.get("partitions")
    if isinstance(body, str) and body.isdigit():
        body = int(body)
    count = int_of(body, "the partition count", minimum=1)
    if count > MAX_PARTITIONS:
        raise RestError(400, f"the partition count must be at most {MAX_PARTITIONS}, not {count}")
    return count


async def create_partitioned(request: web.Request, ctx: RestContext) -> web.Response:
    topic = topic_of(request)
    count = _partition_count(await json_body(request, PARTITIONS_BODY))
    await ctx.blocking(_create, ctx, topic, count)
    return no_content()


async def grow_partitions(request: web.Request, ctx: RestContext) -> web.Response:
    topic = topic_of(request)
    count = _partition_count(await json_body(request, PARTITIONS_BODY))
    local_only = query_flag(request, "updateLocalTopicOnly")
    if ctx.grow_topic is None:
        await ctx.blocking(ctx.admin.topics.update_partitions, str(topic), count)
    else:  # (geo-replication: the remotes grow too, and the replicators make room)
        await ctx.grow_topic(str(topic), count, local_only)
    return no_content()


async def get_partitions(request: web.Request, ctx: RestContext) -> web.Response:
    """{"partitions": N}: N for a partitioned topic, 0 for a non-partitioned one or one not created yet in an
    existing namespace (producers create it), as the client's HTTP lookup needs; 404 for a missing namespace.
    With `checkAllowAutoCreation=true` (the client's HTTP lookup sends it) a missing topic is created here where
    the namespace auto-creates partitioned topics, as PARTITIONED_METADATA does."""
    name = f"persistent://{topic_of(request)}"
    create = query_flag(request, "checkAllowAutoCreation")
    return json_response({"partitions": await ctx.blocking(ctx.service.partitions, name, create)})


def _delete(ctx: RestContext, topic: TopicName, force: bool, partitioned: bool) -> None:
    partitions = partitions_of(ctx, topic)
    if partitioned and partitions == 1:
        raise RestError(404, f"partitioned topic {topic} does not exist ({topic} is a non-partitioned topic: "
                             f"DELETE {_path(topic)})")
    if not partitioned and partitions > 1:
        raise RestError(405, f"{topic} is a partitioned topic ({partitions} partitions): DELETE "
                             f"{_path(topic)}/partitions")
    ctx.broker.delete_topic(str(topic), force=force)


def _path(topic: TopicName) -> str:
    return f"/admin/v2/persistent/{topic}"


async def delete_topic(request: web.Request, ctx: RestContext) -> web.Response:
    await ctx.blocking(_delete, ctx, topic_of(request), query_flag(request, "force"), False)
    return no_content()


async def delete_partitioned(request: web.Request, ctx: RestContext) -> web.Response:
    await ctx.blocking(_delete, ctx, topic_of(request), query_flag(request, "force"), True)
    return no_content()


def _kind(ctx: RestContext, topic: TopicName, partitioned: bool) -> None:
    partitions = partitions_of(ctx, topic)
    if partitioned and partitions == 1:
        raise RestError(404, f"partitioned topic {topic} does not exist ({topic} is non-partitioned)")
    if not partitioned and partitions > 1:
        raise RestError(405, f"{topic} is a partitioned topic ({partitions} partitions): ask for its "
                             "partitioned-stats or partitioned-internalStats, or a partition's (NAME-partition-i)")


async def get_stats(request: web.Request, ctx: RestContext) -> web.Response:
    topic = topic_of(request)

    def stats() -> dict[str, Any]:
        _kind(ctx, topic, False)
        return topic_stats(ctx, str(topic))
    return json_response(await ctx.blocking(stats))


async def get_partitioned_stats(request: web.Request, ctx: RestContext) -> web.Response:
    topic = topic_of(request)
    per_partition = request.query.get("perPartition", "true").lower() != "false"

    def stats() -> dict[str, Any]:  # (NotFoundError, 404, for a non-partitioned topic)
        return partitioned_stats(ctx, str(topic), per_partition)
    return json_response(await ctx.blocking(stats))


async def get_internal_stats(request: web.Request, ctx: RestContext) -> web.Response:
    topic = topic_of(request)

    def stats() -> dict[str, Any]:
        _kind(ctx, topic, False)
        return internal_stats(ctx, str(topic))
    return json_response(await ctx.blocking(stats))


async def get_partitioned_internal_stats(request: web.Request, ctx: RestContext) -> web.Response:
    topic = topic_of(request)

    def stats() -> dict[str, Any]:
        _kind(ctx, topic, True)
        ref = ctx.broker.topic(topic)
        return {"metadata": {"partitions": ref.partitions},
                "partitions": {ref.pulsar_name(p): internal_stats(ctx, str(topic), p) for p in range(ref.partitions)}}
    return json_response(await ctx.blocking(stats))


ROUTES = [
    Route("GET", PREFIX, list_topics, "The namespace's topics: non-partitioned ones and the partitions of "
                                      "partitioned ones (persistent://...).", (200, 404, 412)),
    Route("GET", f"{PREFIX}/partitioned", list_partitioned, "The namespace's partitioned topics.", (200, 404, 412)),
    Route("PUT", TOPIC, create_topic, "Create a non-partitioned topic.", (204, 400, 404, 409, 412),
          "optional properties: none are kept, so only {} is accepted"),
    Route("PUT", f"{TOPIC}/partitions", create_partitioned, "Create a partitioned topic.",
          (204, 400, 404, 409, 412), PARTITIONS_BODY),
    Route("POST", f"{TOPIC}/partitions", grow_partitions, "Give a topic more partitions (never fewer); refused "
                                                          "while producers or consumers use it (geo-replicators "
                                                          "make room). A replicated topic grows on the clusters "
                                                          "it replicates to first, unless "
                                                          "updateLocalTopicOnly=true.",
          (204, 400, 404, 412, 503), PARTITIONS_BODY, query=("updateLocalTopicOnly",)),
    Route("GET", f"{TOPIC}/partitions", get_partitions, '{"partitions": N}; 0 for a non-partitioned topic or one '
                                                        "not created yet.", (200, 404, 412),
          query=("checkAllowAutoCreation",)),
    Route("DELETE", TOPIC, delete_topic, "Delete a non-partitioned topic; refused while producers or consumers "
                                         "use it, unless force=true.", (204, 404, 405, 412), query=("force",)),
    Route("DELETE", f"{TOPIC}/partitions", delete_partitioned, "Delete a partitioned topic; refused while "
                                                               "producers or consumers use it, unless force=true.",
          (204, 404, 412), query=("force",)),
    Route("GET", f"{TOPIC}/stats", get_stats, "TopicStats.", (200, 404, 405, 412)),
    Route("GET", f"{TOPIC}/partitioned-stats", get_partitioned_stats, "PartitionedTopicStats.", (200, 404, 412),
          query=("perPartition",)),
    Route("GET", f"{TOPIC}/internalStats", get_internal_stats, "PersistentTopicInternalStats.",
          (200, 404, 405, 412)),
    Route("GET", f"{TOPIC}/partitioned-internalStats", get_partitioned_internal_stats,
          "Each partition's PersistentTopicInternalStats.", (200, 404, 412)),
    *TOPIC_ROUTES,
]
