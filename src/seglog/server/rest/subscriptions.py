"""/admin/v2/persistent/{tenant}/{namespace}/{topic}/subscription...: a topic's subscriptions and their cursors
(create, unsubscribe, reset-cursor by time and by message id, skip, clear backlog, expire, peek, whether they
are replicated).

Message ids are the binary protocol's (server/protocol/message_ids.py): entryId is the offset, and
`partitionIndex` names the partition of a partitioned topic. Moving a cursor disconnects the subscription's
consumers on this server, as Pulsar's reset-cursor does: the clients subscribe again and receive from the new
position."""

from __future__ import annotations

import json
import time
from typing import Any

from aiohttp import web

from seglog.errors import ConsumerBusyError, InvalidArgumentError
from seglog.names import TopicName, validate_subscription_name
from seglog.server.protocol.message_ids import offset_of
from seglog.server.rest.base import (
    RestContext,
    Route,
    int_of,
    json_body,
    no_content,
    partition_named,
    path_int,
    query_flag,
    topic_of,
)
from seglog.server.rest.base import json_response as json_reply
from seglog.server.rest.errors import RestError
from seglog.server.rest.messages import message_headers
from seglog.server.rest.topics import TOPIC, partitions_of

SUBSCRIPTION = f"{TOPIC}/subscription/{{subscription}}"
MESSAGE_ID = ('"latest", "earliest", or a MessageId {"ledgerId": 0, "entryId": offset, "partitionIndex": p} '
              "(partitionIndex: the partition of a partitioned topic)")
RESET_CURSOR_DATA = ('ResetCursorData {"ledgerId": 0, "entryId": offset, "partitionIndex": p, "batchIndex": -1, '
                     '"isExcluded": false}')
REPLICATED = "true or false: whether the subscription's position is replicated to the other clusters"


def subscription_of(request: web.Request) -> str:
    return validate_subscription_name(request.match_info["subscription"])


def consumed_elsewhere(topic: TopicName, subscription: str) -> ConsumerBusyError:
    return ConsumerBusyError(f"subscription {subscription} of {topic} is consumed by another process; change it "
                             "there, or once it stopped")


def disconnect_consumers(ctx: RestContext, topic: TopicName, subscription: str) -> None:
    """Close the subscription's consumers on this server (they subscribe again), as Pulsar does when a cursor
    moves under them."""
    live = ctx.broker.subscriptions.live(ctx.broker.topic(topic), subscription)
    if live is not None:
        for consumer in list(live.consumers):
            consumer.disconnect()


def message_position(ctx: RestContext, topic: TopicName, data: Any, what: str) -> tuple[int, int]:
    """(partition, offset) a MessageId or ResetCursorData names; 400 for anything else."""
    if not isinstance(data, dict) or "entryId" not in data:
        raise RestError(400, f"expected {what}")
    partitions = partitions_of(ctx, topic)
    entry = int_of(data["entryId"], "entryId", minimum=0)
    batch = int_of(data.get("batchIndex", -1), "batchIndex", minimum=-1)
    partition = int_of(data.get("partitionIndex", -1), "partitionIndex", minimum=-1)
    int_of(data.get("ledgerId", 0), "ledgerId")
    if partitions == 1 and partition in (-1, 0):
        partition = 0
    elif not 0 <= partition < partitions:
        raise RestError(400, f"partitionIndex {partition}: {topic} has partitions 0 to {partitions - 1}")
    offset = offset_of(entry, batch)
    excluded = data.get("isExcluded", data.get("excluded", False))
    if not isinstance(excluded, bool):
        raise RestError(400, f"isExcluded must be true or false, not {excluded!r}")
    return partition, offset + (1 if excluded else 0)


async def list_subscriptions(request: web.Request, ctx: RestContext) -> web.Response:
    return json_reply(await ctx.blocking(ctx.admin.topics.subscriptions, str(topic_of(request))))


async def create_subscription(request: web.Request, ctx: RestContext) -> web.Response:
    topic, subscription = topic_of(request), subscription_of(request)
    body = await json_body(request, MESSAGE_ID, optional=True)

    def create() -> None:
        if body is None or body in ("latest", "earliest"):
            ctx.admin.topics.create_subscription(str(topic), subscription, body or "latest")
            return
        partition, offset = message_position(ctx, topic, body, MESSAGE_ID)
        ref = ctx.broker.topic(topic)
        offsets = {p: ctx.broker.store.end_offset(ref.name, p) for p in range(ref.partitions)}
        offsets[partition] = offset
        ctx.admin.topics.create_subscription(str(topic), subscription, offsets)
    await ctx.blocking(create)
    return no_content()


FORCE_WAIT_S = 5.0


def _unsubscribe(ctx: RestContext, topic: TopicName, subscription: str, force: bool) -> None:
    """Delete the subscription. With `force`, its consumers on this server are closed first: each leaves
    when its connection handles the close, so the deletion is tried again until they are gone (bounded)."""
    deadline = time.monotonic() + FORCE_WAIT_S
    while True:
        try:
            ctx.admin.topics.unsubscribe(str(topic), subscription, force=force)
            return
        except ConsumerBusyError:
            if not force or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


async def unsubscribe(request: web.Request, ctx: RestContext) -> web.Response:
    topic, subscription = topic_of(request), subscription_of(request)
    await ctx.blocking(_unsubscribe, ctx, topic, subscription, query_flag(request, "force"))
    return no_content()


def _moved(ctx: RestContext, topic: TopicName, subscription: str, moved: bool) -> None:
    if not moved:
        raise consumed_elsewhere(topic, subscription)
    disconnect_consumers(ctx, topic, subscription)


async def reset_cursor_to_time(request: web.Request, ctx: RestContext) -> web.Response:
    topic, subscription = topic_of(request), subscription_of(request)
    timestamp = path_int(request, "timestamp", "timestamp (ms since the epoch)")

    def reset() -> None:
        _moved(ctx, topic, subscription, ctx.admin.topics.reset_cursor_to_time(str(topic), subscription, timestamp))
    await ctx.blocking(reset)
    return no_content()


async def reset_cursor(request: web.Request, ctx: RestContext) -> web.Response:
    topic, subscription = topic_of(request), subscription_of(request)
    body = await json_body(request, RESET_CURSOR_DATA)

    def reset() -> None:
        partition, offset = message_position(ctx, topic, body, RESET_CURSOR_DATA)
        _moved(ctx, topic, subscription, ctx.admin.topics.reset_cursor(str(topic), subscription, {partition: offset}))
    await ctx.blocking(reset)
    return no_content()


async def skip(request: web.Request, ctx: RestContext) -> web.Response:
    topic, subscription = topic_of(request), subscription_of(request)
    count = path_int(request, "count", "the number of messages to skip", minimum=1)
    await ctx.blocking(ctx.admin.topics.skip, str(topic), subscription, count)
    return no_content()


async def skip_all(request: web.Request, ctx: RestContext) -> web.Response:
    topic, subscription = topic_of(request), subscription_of(request)

    def clear() -> None:
        try:
            ctx.admin.topics.clear_backlog(str(topic), subscription)
        except InvalidArgumentError as error:
            if error.argument == "subscription" and subscription not in ctx.admin.topics.subscriptions(str(topic)):
                raise RestError(404, str(error), error) from None  # Pulsar's 404, seglog's error
            raise
    await ctx.blocking(clear)
    return no_content()


async def expire_messages(request: web.Request, ctx: RestContext) -> web.Response:
    topic, subscription = topic_of(request), subscription_of(request)
    seconds = path_int(request, "seconds", "the expiry time in seconds")
    await ctx.blocking(ctx.admin.topics.expire_messages, str(topic), subscription, seconds)
    return no_content()


async def expire_all(request: web.Request, ctx: RestContext) -> web.Response:
    topic = topic_of(request)
    seconds = path_int(request, "seconds", "the expiry time in seconds")

    def expire() -> None:
        for subscription in ctx.admin.topics.subscriptions(str(topic)):
            ctx.admin.topics.expire_messages(str(topic), subscription, seconds)
    await ctx.blocking(expire)
    return no_content()


async def peek(request: web.Request, ctx: RestContext) -> web.Response:
    """The n-th (from 1) message the subscription has not acknowledged, payload as the body and metadata in
    headers (messages.py); on a partitioned topic, of partition 0 unless the topic is named as
    `NAME-partition-i`."""
    topic, subscription = topic_of(request), subscription_of(request)
    n = path_int(request, "position", "the message position (from 1)", minimum=1)

    def find() -> tuple[Any, bool]:
        name, named = partition_named(ctx, topic)
        partition = named or 0
        messages = [m for m in ctx.admin.topics.peek_messages(str(name), subscription, n) if m.partition == partition]
        if len(messages) < n:
            raise RestError(404, f"subscription {subscription} of {topic} has {len(messages)} unacknowledged "
                                 f"message(s), fewer than {n}")
        return messages[n - 1], partitions_of(ctx, name) > 1
    message, partitioned = await ctx.blocking(find)
    return web.Response(body=message.value, content_type="application/octet-stream",
                        headers=message_headers(message, partitioned))


async def get_replicated_status(request: web.Request, ctx: RestContext) -> web.Response:
    """{topic or partition: replicated} (Admin's get_replicated_subscription_status): every partition of a
    partitioned topic, or the one its name (NAME-partition-i) names."""
    topic, subscription = topic_of(request), subscription_of(request)

    def get() -> dict[str, bool]:
        name, partition = partition_named(ctx, topic)
        return ctx.admin.topics.get_replicated_subscription_status(str(name), subscription, partition=partition)
    return json_reply(await ctx.blocking(get))


async def set_replicated_status(request: web.Request, ctx: RestContext) -> web.Response:
    topic, subscription = topic_of(request), subscription_of(request)
    enabled = await json_body(request, REPLICATED)
    if not isinstance(enabled, bool):
        raise RestError(400, f"expected {REPLICATED}, not {json.dumps(enabled)}")

    def set_status() -> None:
        name, partition = partition_named(ctx, topic)
        ctx.admin.topics.set_replicated_subscription_status(str(name), subscription, enabled, partition=partition)
    await ctx.blocking(set_status)
    return no_content()


ROUTES = [
    Route("GET", f"{TOPIC}/subscriptions", list_subscriptions, "The topic's subscriptions.", (200, 404, 412)),
    Route("PUT", SUBSCRIPTION, create_subscription, "Create a subscription at latest, earliest or a message id.",
          (204, 400, 404, 409, 412), MESSAGE_ID),
    Route("DELETE", SUBSCRIPTION, unsubscribe, "Delete a subscription; refused while it has consumers, unless "
                                               "force=true (this server's consumers are closed).",
          (204, 404, 412), query=("force",)),
    Route("POST", f"{SUBSCRIPTION}/resetcursor/{{timestamp}}", reset_cursor_to_time,
          "Move the cursor to the first message at or after a time (ms since the epoch).", (204, 400, 404, 412)),
    Route("POST", f"{SUBSCRIPTION}/resetcursor", reset_cursor, "Move the cursor to a message id.",
          (204, 400, 404, 412), RESET_CURSOR_DATA),
    Route("POST", f"{SUBSCRIPTION}/skip/{{count}}", skip, "Acknowledge the next N messages of each partition.",
          (204, 400, 404, 412)),
    Route("POST", f"{SUBSCRIPTION}/skip_all", skip_all, "Acknowledge every message (clear the backlog).",
          (204, 404, 412)),
    Route("POST", f"{SUBSCRIPTION}/expireMessages/{{seconds}}", expire_messages,
          "Acknowledge the messages older than N seconds.", (204, 400, 404, 412)),
    Route("POST", f"{TOPIC}/all_subscription/expireMessages/{{seconds}}", expire_all,
          "Acknowledge, on every subscription, the messages older than N seconds.", (204, 400, 404, 412)),
    Route("GET", f"{SUBSCRIPTION}/position/{{position}}", peek,
          "The n-th unacknowledged message: payload as the body, metadata in X-Pulsar-* headers.",
          (200, 400, 404, 412)),
    Route("GET", f"{SUBSCRIPTION}/replicatedSubscriptionStatus", get_replicated_status,
          "Whether the subscription is replicated (PIP-33), by topic or partition name.", (200, 400, 404, 412)),
    Route("POST", f"{SUBSCRIPTION}/replicatedSubscriptionStatus", set_replicated_status,
          "Replicate the subscription (PIP-33) or stop: on every partition, or on the partition named "
          "NAME-partition-i. Enabling is refused while broker.conf disables replicated subscriptions.",
          (204, 400, 404, 412), REPLICATED),
]
