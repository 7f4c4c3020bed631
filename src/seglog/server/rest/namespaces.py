"""/admin/v2/namespaces: namespaces, their Policies, their topics, clearing their backlog, the roles'
permissions; the policies themselves are in policies.py."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from seglog.catalog.policies import AutoTopicCreation
from seglog.errors import InvalidArgumentError
from seglog.names import NamespaceName
from seglog.names import validate_subscription_name as check_subscription
from seglog.server.rest import non_persistent_topics
from seglog.server.rest.base import (
    RestContext,
    Route,
    json_body,
    json_response,
    namespace_of,
    no_content,
    query_flag,
    tenant_of,
)
from seglog.server.rest.errors import RestError
from seglog.server.rest.policies import NAMESPACE_ROUTES, parse_backlog_quota, parse_retention
from seglog.server.rest.topics import pulsar_topic_names

NAMESPACES = "/admin/v2/namespaces/{tenant}"
NAMESPACE = "/admin/v2/namespaces/{tenant}/{namespace}"
POLICIES = ("optional Policies: replication_clusters, allowed_clusters (lists of cluster names; empty or absent: "
            "unset), retention_policies, message_ttl_in_seconds, backlog_quota_map, autoTopicCreationOverride and "
            "auth_policies.namespace_auth ({role: [actions]}) are applied")
AUTO_TOPIC_CREATION = ('AutoTopicCreationOverride: {"allowAutoTopicCreation": true, "topicType": "partitioned", '
                       '"defaultNumPartitions": 4} (topicType "non-partitioned" takes no defaultNumPartitions)')
ACTIONS = 'the actions to grant: a JSON list of "produce" and/or "consume"'


async def list_namespaces(request: web.Request, ctx: RestContext) -> web.Response:
    return json_response(await ctx.blocking(ctx.admin.namespaces.list, tenant_of(request)))


async def get_policies(request: web.Request, ctx: RestContext) -> web.Response:
    return json_response(await ctx.blocking(ctx.admin.namespaces.policies, namespace_of(request)))


def _create(ctx: RestContext, name: str, body: Any) -> None:
    """Create the namespace, then set the policies the body gives (each checked before the namespace is made)."""
    body = body or {}
    if not isinstance(body, dict):
        raise RestError(400, f"expected {POLICIES}")
    changes: list[tuple[str, dict[str, Any]]] = []
    if body.get("retention_policies") is not None:
        size, time = parse_retention(body["retention_policies"])
        changes.append(("set_retention", {"size": size, "time": time}))
    if body.get("message_ttl_in_seconds") is not None:
        changes.append(("set_message_ttl", {"seconds": body["message_ttl_in_seconds"]}))
    quotas = body.get("backlog_quota_map") or {}
    if not isinstance(quotas, dict):
        raise RestError(400, "backlog_quota_map must be an object: {type: BacklogQuota}")
    for quota_type, quota in quotas.items():
        if quota_type not in ("destination_storage", "message_age"):
            raise RestError(400, f"backlog_quota_map: unknown backlog quota type {quota_type!r}")
        changes.append(("set_backlog_quota", parse_backlog_quota(quota, quota_type)))
    if body.get("autoTopicCreationOverride") is not None:
        override = _auto_topic_creation(body["autoTopicCreationOverride"])
        changes.append(("set_auto_topic_creation", {"allowed": override.allowed, "topic_type": override.topic_type,
                                                    "partitions": override.partitions}))
    granted = (body.get("auth_policies") or {})
    granted = granted.get("namespace_auth") if isinstance(granted, dict) else granted
    if not isinstance(granted or {}, dict):
        raise RestError(400, "auth_policies must be an object: {\"namespace_auth\": {role: [actions]}}")
    for role, actions in (granted or {}).items():
        changes.append(("grant_permission", {"role": role, "actions": actions}))
    namespaces = ctx.admin.namespaces
    # an empty list is Pulsar's default Policies (Java clients send one): unset, as absent
    namespaces.create(name, clusters=body.get("replication_clusters") or None,
                      allowed_clusters=body.get("allowed_clusters") or None)
    try:
        for method, arguments in changes:
            getattr(namespaces, method)(name, **arguments)
    except BaseException:
        namespaces.delete(name)  # refused policies: no namespace either
        raise


async def create_namespace(request: web.Request, ctx: RestContext) -> web.Response:
    name = namespace_of(request)
    await ctx.blocking(_create, ctx, name, await json_body(request, POLICIES, optional=True))
    return no_content()


async def delete_namespace(request: web.Request, ctx: RestContext) -> web.Response:
    if query_flag(request, "force"):
        raise RestError(405, "force deletion of a namespace is not supported: delete its topics first")
    await ctx.blocking(ctx.admin.namespaces.delete, namespace_of(request))
    return no_content()


def _topics(ctx: RestContext, name: str) -> list[str]:
    if name not in ctx.admin.namespaces.list(name.split("/")[0]):
        raise RestError(404, f"namespace {name} does not exist")
    return pulsar_topic_names(ctx, name, partitioned=False)


async def list_topics(request: web.Request, ctx: RestContext) -> web.Response:
    mode = request.query.get("mode", "PERSISTENT")
    if mode not in ("PERSISTENT", "NON_PERSISTENT", "ALL"):
        raise RestError(400, f"mode={mode!r}: expected PERSISTENT, NON_PERSISTENT or ALL")
    name = namespace_of(request)
    persistent = await ctx.blocking(_topics, ctx, name)  # (404 for a missing namespace, whatever the mode)
    topics = [] if mode == "NON_PERSISTENT" else persistent
    if mode != "PERSISTENT":
        topics += non_persistent_topics.topic_names(ctx, name)
    return json_response(topics)


async def get_permissions(request: web.Request, ctx: RestContext) -> web.Response:
    return json_response(await ctx.blocking(ctx.admin.namespaces.permissions, namespace_of(request)))


async def grant_permission(request: web.Request, ctx: RestContext) -> web.Response:
    name, role = namespace_of(request), request.match_info["role"]
    actions = await json_body(request, ACTIONS)
    if not isinstance(actions, list):
        raise RestError(400, f"expected {ACTIONS}, not {actions!r}")
    await ctx.blocking(ctx.admin.namespaces.grant_permission, name, role, actions)
    return no_content()


async def revoke_permission(request: web.Request, ctx: RestContext) -> web.Response:
    await ctx.blocking(ctx.admin.namespaces.revoke_permission, namespace_of(request), request.match_info["role"])
    return no_content()


async def clear_backlog(request: web.Request, ctx: RestContext) -> web.Response:
    name = namespace_of(request)
    subscription = request.match_info.get("subscription")
    if subscription is not None:
        check_subscription(subscription)
    await ctx.blocking(_checked_namespace_call, ctx, name, ctx.admin.namespaces.clear_backlog, subscription)
    return no_content()


def _auto_topic_creation(body: Any) -> AutoTopicCreation:
    """The override a body gives; 412 as Pulsar answers an invalid one."""
    try:
        return AutoTopicCreation.from_admin(body)
    except InvalidArgumentError as error:
        raise RestError(412, f"Invalid configuration for autoTopicCreationOverride: {error}", error) from None


async def get_auto_topic_creation(request: web.Request, ctx: RestContext) -> web.Response:
    name = namespace_of(request)
    return json_response(await ctx.blocking(_checked_namespace_call, ctx, name,
                                            ctx.admin.namespaces.get_auto_topic_creation))


async def set_auto_topic_creation(request: web.Request, ctx: RestContext) -> web.Response:
    name = namespace_of(request)
    override = _auto_topic_creation(await json_body(request, AUTO_TOPIC_CREATION))
    await ctx.blocking(_checked_namespace_call, ctx, name, ctx.admin.namespaces.set_auto_topic_creation,
                       override.allowed, override.topic_type, override.partitions)
    return no_content()


async def remove_auto_topic_creation(request: web.Request, ctx: RestContext) -> web.Response:
    name = namespace_of(request)
    await ctx.blocking(_checked_namespace_call, ctx, name, ctx.admin.namespaces.remove_auto_topic_creation)
    return no_content()


def _checked_namespace_call(ctx: RestContext, name: str, call: Any, *args: Any) -> Any:
    if name not in ctx.admin.namespaces.list(str(NamespaceName.parse(name).tenant)):
        raise RestError(404, f"namespace {name} does not exist")
    return call(name, *args)


def _unsubscribe(ctx: RestContext, name: str, subscription: str) -> None:
    """Delete the subscription on every topic of the namespace that has it."""
    for topic in ctx.broker.catalog.topic_names():
        if topic.startswith(f"{name}/") and subscription in ctx.admin.topics.subscriptions(topic):
            ctx.admin.topics.unsubscribe(topic, subscription)


async def unsubscribe(request: web.Request, ctx: RestContext) -> web.Response:
    name = namespace_of(request)
    subscription = check_subscription(request.match_info["subscription"])
    await ctx.blocking(_checked_namespace_call, ctx, name, lambda n, s: _unsubscribe(ctx, n, s), subscription)
    return no_content()


ROUTES = [
    Route("GET", NAMESPACES, list_namespaces, "The tenant's namespaces ('tenant/namespace').", (200, 404, 412)),
    Route("PUT", NAMESPACE, create_namespace, "Create a namespace.", (204, 400, 403, 404, 409, 412), POLICIES),
    Route("GET", NAMESPACE, get_policies, "The namespace's Policies.", (200, 404, 412)),
    Route("DELETE", NAMESPACE, delete_namespace, "Delete a namespace without topics.", (204, 404, 405, 409, 412),
          query=("force",)),
    Route("GET", f"{NAMESPACE}/topics", list_topics, "The namespace's topics (persistent://..., partitions by "
                                                     "their -partition-N names).", (200, 400, 404, 412),
          query=("mode",)),
    Route("GET", f"{NAMESPACE}/permissions", get_permissions, "The roles' permissions: {role: [actions]}.",
          (200, 404, 412)),
    Route("POST", f"{NAMESPACE}/permissions/{{role}}", grant_permission, "Grant a role produce and/or consume "
                                                                          "(replacing what it had).",
          (204, 400, 404, 412), ACTIONS),
    Route("DELETE", f"{NAMESPACE}/permissions/{{role}}", revoke_permission, "Revoke every permission of a role.",
          (204, 400, 404, 412)),
    Route("POST", f"{NAMESPACE}/clearBacklog", clear_backlog, "Acknowledge everything on every topic of the "
                                                              "namespace, for every subscription.",
          (204, 400, 404, 412)),
    Route("POST", f"{NAMESPACE}/clearBacklog/{{subscription}}", clear_backlog,
          "Acknowledge everything on every topic of the namespace, for one subscription.", (204, 400, 404, 412)),
    Route("POST", f"{NAMESPACE}/unsubscribe/{{subscription}}", unsubscribe,
          "Delete a subscription on every topic of the namespace.", (204, 404, 412)),
    Route("GET", f"{NAMESPACE}/autoTopicCreation", get_auto_topic_creation,
          "The namespace's AutoTopicCreationOverride (null: the broker's allowAutoTopicCreation settings apply).",
          (200, 404, 412)),
    Route("POST", f"{NAMESPACE}/autoTopicCreation", set_auto_topic_creation,
          "Whether and how topics of the namespace are created on first use.", (204, 400, 404, 412),
          AUTO_TOPIC_CREATION),
    Route("DELETE", f"{NAMESPACE}/autoTopicCreation", remove_auto_topic_creation,
          "Remove the namespace's override: the broker's settings apply.", (204, 404, 412)),
    *NAMESPACE_ROUTES,
]
