"""The policies namespaces and topics share (retention, message TTL, backlog quotas, deduplication, the
compaction threshold), as Pulsar's JSON:
RetentionPolicies in minutes and MB, the TTL in seconds, BacklogQuota with limitSize (bytes) or limitTime
(seconds), the compaction threshold in bytes. One set of handlers per level: `namespace_routes` under
/admin/v2/namespaces/{t}/{ns}, `topic_routes` under /admin/v2/persistent/{t}/{ns}/{topic} (where GET takes
?applied=true for the value in force, and the TTL is set by the query parameter messageTTL, as in Pulsar)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web

from seglog.admin.api import PolicyLevel, pulsar_backlog_quota
from seglog.admin.stats import shown_retention
from seglog.catalog.policies import MB, MINUTE_MS, QUOTA_TYPES, SECOND_MS, Retention
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

RETENTION = 'RetentionPolicies: {"retentionTimeInMinutes": int, "retentionSizeInMB": int} (-1: no limit)'
COMPACTION_THRESHOLD = "the compaction threshold in bytes, a bare integer (0: no compaction by size)"
BACKLOG_QUOTA = ('BacklogQuota: {"limitSize": bytes} for destination_storage or {"limitTime": seconds} for '
                 'message_age, and "policy": producer_request_hold, producer_exception or consumer_backlog_eviction')


def retention_policies(retention: Retention | None) -> dict[str, int] | None:
    return retention.to_admin() if retention is not None else None


def parse_retention(body: Any) -> tuple[int, int]:
    """(size in bytes, time in seconds) of a RetentionPolicies body, for PolicyLevel.set_retention."""
    if not isinstance(body, dict) or not {"retentionTimeInMinutes", "retentionSizeInMB"} <= set(body):
        raise RestError(400, f"expected {RETENTION}")
    minutes = int_of(body["retentionTimeInMinutes"], "retentionTimeInMinutes", minimum=-1)
    megabytes = int_of(body["retentionSizeInMB"], "retentionSizeInMB", minimum=-1)
    return (megabytes if megabytes <= 0 else megabytes * MB,
            minutes if minutes <= 0 else minutes * MINUTE_MS // SECOND_MS)


def parse_backlog_quota(body: Any, quota_type: str) -> dict[str, Any]:
    """The keyword arguments of PolicyLevel.set_backlog_quota for a BacklogQuota body."""
    if not isinstance(body, dict) or not isinstance(body.get("policy"), str):
        raise RestError(400, f"expected {BACKLOG_QUOTA}")
    size = body.get("limitSize", body.get("limit"))
    seconds = body.get("limitTime")
    unset = (None, -1)
    if quota_type == "destination_storage":
        if seconds not in unset:
            raise RestError(400, "limitTime goes with backlogQuotaType=message_age; a destination_storage quota "
                                 "takes limitSize (bytes)")
        return {"limit": int_of(size, "limitSize", minimum=1), "limit_time": None, "policy": body["policy"],
                "type": quota_type}
    if size not in unset:
        raise RestError(400, "limitSize goes with backlogQuotaType=destination_storage; a message_age quota takes "
                             "limitTime (seconds)")
    return {"limit": None, "limit_time": int_of(seconds, "limitTime", minimum=1), "policy": body["policy"],
            "type": quota_type}


def parse_compaction_threshold(body: Any) -> int:
    """A compactionThreshold body's bytes: 412 for a negative one, as Pulsar answers it."""
    if isinstance(body, int) and not isinstance(body, bool) and body < 0:
        raise RestError(412, "compactionThreshold must be 0 or more")
    return int_of(body, "compactionThreshold", minimum=0)


def quota_type_of(request: web.Request) -> str:
    quota_type = request.query.get("backlogQuotaType", "destination_storage")
    if quota_type not in QUOTA_TYPES:
        raise RestError(400, f"backlogQuotaType={quota_type!r}: expected {' or '.join(QUOTA_TYPES)}")
    return quota_type


def _routes(prefix: str, noun: str, level: Callable[[RestContext], PolicyLevel],
            name_of: Callable[[web.Request], str], applied: Callable[[RestContext, str, str], Any] | None,
            deduplication: str, set_threshold: tuple[str, ...]) -> list[Route]:
    """Retention, message TTL, backlog quota, deduplication (at `prefix/deduplication`) and compaction threshold
    (set with the methods `set_threshold`) routes for one level of policies."""

    async def get(request: web.Request, ctx: RestContext, policy: str) -> Any:
        name = name_of(request)
        if applied is not None and query_flag(request, "applied"):
            return await ctx.blocking(applied, ctx, name, policy)
        value = await ctx.blocking(getattr(level(ctx), f"get_{policy}"), name)
        if policy == "backlog_quotas":
            return {t: pulsar_backlog_quota(q) for t, q in value.items()}
        return value

    async def get_retention(request: web.Request, ctx: RestContext) -> web.Response:
        return json_response(await get(request, ctx, "retention"))

    async def set_retention(request: web.Request, ctx: RestContext) -> web.Response:
        size, time = parse_retention(await json_body(request, RETENTION))
        await ctx.blocking(level(ctx).set_retention, name_of(request), size=size, time=time)
        return no_content()

    async def remove_retention(request: web.Request, ctx: RestContext) -> web.Response:
        await ctx.blocking(level(ctx).remove_retention, name_of(request))
        return no_content()

    async def get_ttl(request: web.Request, ctx: RestContext) -> web.Response:
        return json_response(await get(request, ctx, "message_ttl"))

    async def set_ttl(request: web.Request, ctx: RestContext) -> web.Response:
        if applied is not None:  # a topic: ?messageTTL=N, as Pulsar
            text = request.query.get("messageTTL")
            if text is None or not text.lstrip("-").isdigit():
                raise RestError(400, f"query parameter messageTTL={text!r}: expected seconds, an integer")
            seconds = int(text)
        else:
            seconds = await json_body(request, "the TTL in seconds, a bare integer")
        await ctx.blocking(level(ctx).set_message_ttl, name_of(request), int_of(seconds, "messageTTL", minimum=0))
        return no_content()

    async def remove_ttl(request: web.Request, ctx: RestContext) -> web.Response:
        await ctx.blocking(level(ctx).remove_message_ttl, name_of(request))
        return no_content()

    async def get_quotas(request: web.Request, ctx: RestContext) -> web.Response:
        return json_response(await get(request, ctx, "backlog_quotas"))

    async def set_quota(request: web.Request, ctx: RestContext) -> web.Response:
        quota = parse_backlog_quota(await json_body(request, BACKLOG_QUOTA), quota_type_of(request))
        await ctx.blocking(level(ctx).set_backlog_quota, name_of(request), **quota)
        return no_content()

    async def remove_quota(request: web.Request, ctx: RestContext) -> web.Response:
        await ctx.blocking(level(ctx).remove_backlog_quota, name_of(request), type=quota_type_of(request))
        return no_content()

    async def get_deduplication(request: web.Request, ctx: RestContext) -> web.Response:
        return json_response(await get(request, ctx, "deduplication"))

    async def set_deduplication(request: web.Request, ctx: RestContext) -> web.Response:
        enabled = await json_body(request, "true or false")
        if not isinstance(enabled, bool):
            raise RestError(400, f"expected true or false, not {enabled!r}")
        await ctx.blocking(level(ctx).set_deduplication, name_of(request), enabled)
        return no_content()

    async def remove_deduplication(request: web.Request, ctx: RestContext) -> web.Response:
        await ctx.blocking(level(ctx).remove_deduplication, name_of(request))
        return no_content()

    async def get_compaction_threshold(request: web.Request, ctx: RestContext) -> web.Response:
        return json_response(await get(request, ctx, "compaction_threshold"))

    async def set_compaction_threshold(request: web.Request, ctx: RestContext) -> web.Response:
        threshold = parse_compaction_threshold(await json_body(request, COMPACTION_THRESHOLD))
        await ctx.blocking(level(ctx).set_compaction_threshold, name_of(request), threshold)
        return no_content()

    async def remove_compaction_threshold(request: web.Request, ctx: RestContext) -> web.Response:
        await ctx.blocking(level(ctx).remove_compaction_threshold, name_of(request))
        return no_content()

    get_query = ("applied",) if applied is not None else ()
    missing = (404, 412)
    return [
        Route("GET", f"{prefix}/retention", get_retention, f"The {noun}'s RetentionPolicies (null: unset).",
              (200, *missing), query=get_query),
        Route("POST", f"{prefix}/retention", set_retention, f"Set the {noun}'s retention.", (204, 400, *missing),
              RETENTION),
        Route("DELETE", f"{prefix}/retention", remove_retention, f"Remove the {noun}'s retention.", (204, *missing)),
        Route("GET", f"{prefix}/messageTTL", get_ttl, f"The {noun}'s message TTL in seconds (null: unset).",
              (200, *missing), query=get_query),
        Route("POST", f"{prefix}/messageTTL", set_ttl, f"Set the {noun}'s message TTL (0: none).",
              (204, 400, *missing), None if applied is not None else "seconds, a bare integer",
              query=("messageTTL",) if applied is not None else ()),
        Route("DELETE", f"{prefix}/messageTTL", remove_ttl, f"Remove the {noun}'s message TTL.", (204, *missing)),
        Route("GET", f"{prefix}/backlogQuotaMap", get_quotas, f"The {noun}'s backlog quotas by type.",
              (200, *missing), query=get_query),
        Route("POST", f"{prefix}/backlogQuota", set_quota, f"Set a backlog quota of the {noun}.",
              (204, 400, *missing), BACKLOG_QUOTA, query=("backlogQuotaType",)),
        Route("DELETE", f"{prefix}/backlogQuota", remove_quota, f"Remove a backlog quota of the {noun}.",
              (204, 400, *missing), query=("backlogQuotaType",)),
        Route("GET", f"{prefix}/{deduplication}", get_deduplication,
              f"Whether the {noun} deduplicates messages by producer name and sequence id (null: unset).",
              (200, *missing), query=get_query),
        Route("POST", f"{prefix}/{deduplication}", set_deduplication, f"Turn the {noun}'s deduplication on or off.",
              (204, 400, *missing), "true or false"),
        Route("DELETE", f"{prefix}/{deduplication}", remove_deduplication,
              f"Remove the {noun}'s deduplication setting.", (204, *missing)),
        Route("GET", f"{prefix}/compactionThreshold", get_compaction_threshold,
              f"The backlog in bytes that starts a compaction of the {noun}'s topics (null: unset).", (200, *missing),
              query=get_query),
        *(Route(method, f"{prefix}/compactionThreshold", set_compaction_threshold,
                f"Set the {noun}'s compaction threshold (0: no compaction by size).", (204, 400, 412, 404),
                COMPACTION_THRESHOLD) for method in set_threshold),
        Route("DELETE", f"{prefix}/compactionThreshold", remove_compaction_threshold,
              f"Remove the {noun}'s compaction threshold.", (204, *missing)),
    ]


def _applied(ctx: RestContext, topic: str, policy: str) -> Any:
    """The value in force on a topic (topic, else namespace, else broker), in Pulsar's JSON."""
    policies = ctx.broker.catalog.policies(ctx.broker.topic(topic))
    if policy == "retention":
        return shown_retention(policies.retention.value)
    if policy == "message_ttl":
        return policies.message_ttl_ms.value // SECOND_MS
    if policy == "deduplication":
        return policies.deduplication.value
    if policy == "compaction_threshold":
        return policies.compaction_threshold.value
    return {t: pulsar_backlog_quota(q.value.to_admin()) for t, q in policies.backlog_quotas.items()}


# Pulsar's paths: a namespace's `deduplication`, a topic's `deduplicationEnabled`; a namespace's compaction
# threshold is set with PUT (Pulsar's Namespaces; POST taken too, as for every other policy), a topic's with POST
NAMESPACE_ROUTES = _routes("/admin/v2/namespaces/{tenant}/{namespace}", "namespace",
                           lambda ctx: ctx.admin.namespaces, namespace_of, None, "deduplication", ("PUT", "POST"))
TOPIC_ROUTES = _routes("/admin/v2/persistent/{tenant}/{namespace}/{topic}", "topic",
                       lambda ctx: ctx.admin.topics, lambda request: str(topic_of(request)), _applied,
                       "deduplicationEnabled", ("POST",))
