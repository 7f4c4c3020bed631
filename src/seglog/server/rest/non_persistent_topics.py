"""/admin/v2/non-persistent/{tenant}/{namespace}: non-persistent topics (server/non_persistent.py), as Pulsar's
NonPersistentTopics resource serves them: list, create and delete (non-partitioned and partitioned), partitions,
stats (NonPersistentTopicStats) and partitioned stats.

They live in the server's memory: a topic the admin API creates stays until it is deleted or the server stops,
a partitioned topic's partition count likewise. Deleting one that has producers or consumers connected is
refused (412), as Pulsar's broker refuses it without `force` (which seglog does not offer here: it would close
the clients). The handlers run on the event loop, which alone
touches the topics; only the namespace's existence is read in the thread pool."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from seglog.broker import MAX_PARTITIONS
from seglog.names import NonPersistentTopicName
from seglog.server.non_persistent import NonPersistentTopic, partitioned_stats
from seglog.server.non_persistent_clients import partition_count
from seglog.server.rest.base import RestContext, Route, json_body, json_response, namespace_of, no_content, query_flag
from seglog.server.rest.errors import RestError
from seglog.server.rest.topics import require_namespace

PREFIX = "/admin/v2/non-persistent/{tenant}/{namespace}"
TOPIC = f"{PREFIX}/{{topic}}"
PARTITIONS_BODY = 'the partition count: a bare integer (4, or "4"), or {"partitions": N}'


def topic_names(ctx: RestContext, namespace: str) -> list[str]:
    """The namespace's non-persistent topics that exist now, partitions each by its own name (Pulsar's list)."""
    return [topic.name for topic in ctx.service.non_persistent.topics_of(namespace)]


def _name(request: web.Request) -> NonPersistentTopicName:
    """The topic of the path, validated (InvalidNameError: 412)."""
    info = request.match_info
    return NonPersistentTopicName(info["tenant"], info["namespace"], info["topic"])


async def _existing_namespace(request: web.Request, ctx: RestContext) -> str:
    namespace = namespace_of(request)
    await ctx.blocking(require_namespace, ctx, namespace)
    return namespace


async def list_topics(request: web.Request, ctx: RestContext) -> web.Response:
    return json_response(topic_names(ctx, await _existing_namespace(request, ctx)))


async def list_partitioned(request: web.Request, ctx: RestContext) -> web.Response:
    return json_response(ctx.service.non_persistent.partitioned_names(await _existing_namespace(request, ctx)))


def _refuse_existing(ctx: RestContext, name: str) -> None:
    topics = ctx.service.non_persistent
    if topics.partition_count(name):
        raise RestError(409, f"{name} is a partitioned topic already ({topics.partition_count(name)} partitions)")
    topic = topics.get(name)
    if topic is not None and topic.created:
        raise RestError(409, f"topic {name} already exists")


async def create_topic(request: web.Request, ctx: RestContext) -> web.Response:
    name = _name(request)
    await _existing_namespace(request, ctx)
    _refuse_existing(ctx, str(name))
    topics = ctx.service.non_persistent
    topics.open(*topics.resolve(name), created=True)
    return no_content()


def _partition_count(body: Any) -> int:
    if isinstance(body, dict) and set(body) <= {"partitions", "properties"} and not body.get("properties"):
        body = body.get("partitions")
    if isinstance(body, str) and body.isdigit():
        body = int(body)
    if isinstance(body, bool) or not isinstance(body, int) or not 1 <= body <= MAX_PARTITIONS:
        raise RestError(400, f"expected {PARTITIONS_BODY}, from 1 to {MAX_PARTITIONS}; got {body!r}")
    return body


async def create_partitioned(request: web.Request, ctx: RestContext) -> web.Response:
    name = _name(request)
    count = _partition_count(await json_body(request, PARTITIONS_BODY))
    await _existing_namespace(request, ctx)
    _refuse_existing(ctx, str(name))
    if ctx.service.non_persistent.get(str(name)) is not None:
        raise RestError(409, f"topic {name} exists as a non-partitioned topic (it has clients)")
    ctx.service.non_persistent.make_partitioned(str(name), count)
    return no_content()


async def get_partitions(request: web.Request, ctx: RestContext) -> web.Response:
    """{"partitions": N}, 0 for a topic that is not partitioned; with `checkAllowAutoCreation=true` (the client's
    HTTP lookup) a missing topic is made partitioned where the namespace auto-creates partitioned topics."""
    create = query_flag(request, "checkAllowAutoCreation")
    count = await partition_count(ctx.service, ctx.blocking, str(_name(request)), create)
    return json_response({"partitions": count})


def _topic(ctx: RestContext, name: str) -> NonPersistentTopic:
    topic = ctx.service.non_persistent.get(name)
    if topic is None:
        raise RestError(404, f"topic {name} does not exist (a non-persistent topic exists while it has producers "
                             "or subscriptions, or from its creation by the admin API)")
    return topic


def _refuse_busy(topics: list[NonPersistentTopic]) -> None:
    clients = sum(topic.clients for topic in topics)
    if clients:
        raise RestError(412, f"Topic has {clients} connected producers/consumers; close them first")


async def delete_topic(request: web.Request, ctx: RestContext) -> web.Response:
    name = _name(request)
    await _existing_namespace(request, ctx)
    topic = _topic(ctx, str(name))
    _refuse_busy([topic])
    ctx.service.non_persistent.delete(topic)
    return no_content()


def _partitions(ctx: RestContext, name: str) -> dict[str, NonPersistentTopic | None]:
    """Each partition's name and topic (None where no client made it); 404 if `name` is not partitioned."""
    topics = ctx.service.non_persistent
    count = topics.partition_count(name)
    if not count:
        raise RestError(404, f"partitioned topic {name} does not exist")
    return {f"{name}-partition-{p}": topics.get(f"{name}-partition-{p}") for p in range(count)}


async def delete_partitioned(request: web.Request, ctx: RestContext) -> web.Response:
    name = _name(request)
    await _existing_namespace(request, ctx)
    partitions = _partitions(ctx, str(name))
    present = [topic for topic in partitions.values() if topic is not None]
    _refuse_busy(present)
    for topic in present:
        ctx.service.non_persistent.delete(topic)
    ctx.service.non_persistent.forget_partitioned(str(name))
    return no_content()


async def get_stats(request: web.Request, ctx: RestContext) -> web.Response:
    name = _name(request)
    await _existing_namespace(request, ctx)
    return json_response(_topic(ctx, str(name)).stats())


async def get_partitioned_stats(request: web.Request, ctx: RestContext) -> web.Response:
    name = _name(request)
    await _existing_namespace(request, ctx)
    partitions = _partitions(ctx, str(name))
    stats = {partition: None if topic is None else topic.stats() for partition, topic in partitions.items()}
    return json_response(partitioned_stats(stats, len(partitions), per_partition=query_flag(request, "perPartition")))


ROUTES = [
    Route("GET", PREFIX, list_topics, "The namespace's non-persistent topics that exist now (partitions by name).",
          (200, 404, 412)),
    Route("GET", f"{PREFIX}/partitioned", list_partitioned, "The namespace's partitioned non-persistent topics.",
          (200, 404, 412)),
    Route("PUT", TOPIC, create_topic, "Create a non-persistent topic (in the server's memory).",
          (204, 404, 409, 412)),
    Route("PUT", f"{TOPIC}/partitions", create_partitioned, "Create a partitioned non-persistent topic.",
          (204, 400, 404, 409, 412), body=PARTITIONS_BODY),
    Route("GET", f"{TOPIC}/partitions", get_partitions, '{"partitions": N}; 0 for a topic that is not partitioned.',
          (200, 404, 412), query=("checkAllowAutoCreation",)),
    Route("DELETE", TOPIC, delete_topic, "Delete a non-persistent topic; refused while clients are connected.",
          (204, 404, 412)),
    Route("DELETE", f"{TOPIC}/partitions", delete_partitioned, "Delete a partitioned non-persistent topic; refused "
          "while clients are connected.", (204, 404, 412)),
    Route("GET", f"{TOPIC}/stats", get_stats, "NonPersistentTopicStats.", (200, 404, 412)),
    Route("GET", f"{TOPIC}/partitioned-stats", get_partitioned_stats, "NonPersistentPartitionedTopicStats.",
          (200, 404, 412), query=("perPartition",)),
]
