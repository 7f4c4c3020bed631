"""/admin/v2/schemas/{tenant}/{namespace}/{topic}/...: topics' schemas as Pulsar's SchemasResource (schema,
schema/{version}, schemas, compatibility, version), and the schema policies of namespaces
(schemaCompatibilityStrategy, isAllowAutoUpdateSchema, schemaValidationEnforced) and topics
(schemaCompatibilityStrategy, schemaValidationEnforced), all through log.admin.schemas."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from seglog.server.rest.base import (
    RestContext,
    Route,
    json_body,
    json_response,
    namespace_of,
    no_content,
    path_int,
    query_flag,
    topic_of,
)
from seglog.server.rest.errors import RestError

SCHEMAS = "/admin/v2/schemas/{tenant}/{namespace}/{topic}"
NAMESPACE = "/admin/v2/namespaces/{tenant}/{namespace}"
TOPIC = "/admin/v2/persistent/{tenant}/{namespace}/{topic}"
PAYLOAD = 'PostSchemaPayload: {"type": "AVRO", "schema": "<definition>", "properties": {...}}'
STRATEGY = ('a strategy as a JSON string: "ALWAYS_INCOMPATIBLE", "ALWAYS_COMPATIBLE", "BACKWARD", "FORWARD", "FULL", '
            '"BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE" or "UNDEFINED"')


async def _payload(request: web.Request) -> tuple[Any, Any, Any]:
    body = await json_body(request, PAYLOAD)
    if not isinstance(body, dict) or "type" not in body:
        raise RestError(400, f"expected {PAYLOAD}")
    return body["type"], body.get("schema") or "", body.get("properties")


async def get_schema(request: web.Request, ctx: RestContext) -> web.Response:
    return json_response(await ctx.blocking(ctx.admin.schemas.get, str(topic_of(request))))


async def get_schema_version(request: web.Request, ctx: RestContext) -> web.Response:
    version = path_int(request, "version", "schema version")
    return json_response(await ctx.blocking(ctx.admin.schemas.get, str(topic_of(request)), version))


async def get_all_schemas(request: web.Request, ctx: RestContext) -> web.Response:
    return json_response({"getSchemaResponses": await ctx.blocking(ctx.admin.schemas.versions,
                                                                   str(topic_of(request)))})


async def post_schema(request: web.Request, ctx: RestContext) -> web.Response:
    kind, schema, properties = await _payload(request)
    version = await ctx.blocking(ctx.admin.schemas.create, str(topic_of(request)), kind, schema, properties)
    return json_response({"version": version})


async def delete_schema(request: web.Request, ctx: RestContext) -> web.Response:
    version = await ctx.blocking(lambda: ctx.admin.schemas.delete(str(topic_of(request)),
                                                                  force=query_flag(request, "force")))
    return json_response({"version": version})


async def test_compatibility(request: web.Request, ctx: RestContext) -> web.Response:
    kind, schema, properties = await _payload(request)
    return json_response(await ctx.blocking(ctx.admin.schemas.compatibility, str(topic_of(request)), kind, schema,
                                            properties))


async def version_of_schema(request: web.Request, ctx: RestContext) -> web.Response:
    kind, schema, properties = await _payload(request)
    return json_response({"version": await ctx.blocking(ctx.admin.schemas.version_of, str(topic_of(request)), kind,
                                                        schema, properties)})


async def _flag(request: web.Request, what: str) -> bool:
    value = await json_body(request, f"{what}: true or false")
    if not isinstance(value, bool):
        raise RestError(400, f"expected {what}: true or false")
    return value


async def get_namespace_strategy(request: web.Request, ctx: RestContext) -> web.Response:
    return json_response(await ctx.blocking(ctx.admin.schemas.get_compatibility_strategy, namespace_of(request)))


async def set_namespace_strategy(request: web.Request, ctx: RestContext) -> web.Response:
    strategy = await json_body(request, STRATEGY)
    await ctx.blocking(ctx.admin.schemas.set_compatibility_strategy, namespace_of(request), strategy)
    return no_content()


async def get_auto_update(request: web.Request, ctx: RestContext) -> web.Response:
    return json_response(await ctx.blocking(ctx.admin.schemas.get_allow_auto_update, namespace_of(request)))


async def set_auto_update(request: web.Request, ctx: RestContext) -> web.Response:
    allowed = await _flag(request, "isAllowAutoUpdateSchema")
    await ctx.blocking(ctx.admin.schemas.set_allow_auto_update, namespace_of(request), allowed)
    return no_content()


async def get_validation(request: web.Request, ctx: RestContext) -> web.Response:
    return json_response(await ctx.blocking(ctx.admin.schemas.get_validation_enforced, namespace_of(request)))


async def set_validation(request: web.Request, ctx: RestContext) -> web.Response:
    enforced = await _flag(request, "schemaValidationEnforced")
    await ctx.blocking(ctx.admin.schemas.set_validation_enforced, namespace_of(request), enforced)
    return no_content()


async def get_topic_strategy(request: web.Request, ctx: RestContext) -> web.Response:
    return json_response(await ctx.blocking(lambda: ctx.admin.schemas.get_topic_compatibility_strategy(
        str(topic_of(request)), applied=query_flag(request, "applied"))))


async def set_topic_strategy(request: web.Request, ctx: RestContext) -> web.Response:
    strategy = await json_body(request, STRATEGY)
    await ctx.blocking(ctx.admin.schemas.set_topic_compatibility_strategy, str(topic_of(request)), strategy)
    return no_content()


async def remove_topic_strategy(request: web.Request, ctx: RestContext) -> web.Response:
    await ctx.blocking(ctx.admin.schemas.set_topic_compatibility_strategy, str(topic_of(request)), None)
    return no_content()


async def get_topic_validation(request: web.Request, ctx: RestContext) -> web.Response:
    return json_response(await ctx.blocking(lambda: ctx.admin.schemas.get_topic_validation_enforced(
        str(topic_of(request)), applied=query_flag(request, "applied"))))


async def set_topic_validation(request: web.Request, ctx: RestContext) -> web.Response:
    enforced = await _flag(request, "schemaValidationEnforced")
    await ctx.blocking(ctx.admin.schemas.set_topic_validation_enforced, str(topic_of(request)), enforced)
    return no_content()


async def remove_topic_validation(request: web.Request, ctx: RestContext) -> web.Response:
    await ctx.blocking(ctx.admin.schemas.set_topic_validation_enforced, str(topic_of(request)), None)
    return no_content()


ROUTES = [
    Route("GET", f"{SCHEMAS}/schema", get_schema, "The topic's latest schema (GetSchemaResponse).", (200, 404)),
    Route("GET", f"{SCHEMAS}/schema/{{version}}", get_schema_version, "One version of the topic's schema.",
          (200, 400, 404)),
    Route("GET", f"{SCHEMAS}/schemas", get_all_schemas,
          "Every version since the last deletion (GetAllVersionsSchemaResponse).", (200,)),
    Route("POST", f"{SCHEMAS}/schema", post_schema, "Upload a schema: its version (PostSchemaResponse); 409 when "
          "incompatible, 422 when the definition does not fit its type.", (200, 400, 409, 422), PAYLOAD),
    Route("DELETE", f"{SCHEMAS}/schema", delete_schema, "Delete the topic's schema (a tombstone version; every "
          "version with force=true).", (200,), query=("force",)),
    Route("POST", f"{SCHEMAS}/compatibility", test_compatibility,
          "Whether a schema could be uploaded (IsCompatibilityResponse).", (200, 400, 422), PAYLOAD),
    Route("POST", f"{SCHEMAS}/version", version_of_schema, "The version of a kept schema (-1: none).",
          (200, 400, 422), PAYLOAD),
    Route("GET", f"{NAMESPACE}/schemaCompatibilityStrategy", get_namespace_strategy,
          "The namespace's schema compatibility strategy (UNDEFINED: the broker's, FULL).", (200, 404)),
    Route("PUT", f"{NAMESPACE}/schemaCompatibilityStrategy", set_namespace_strategy,
          "Set the namespace's schema compatibility strategy.", (204, 400, 404), STRATEGY),
    Route("GET", f"{NAMESPACE}/isAllowAutoUpdateSchema", get_auto_update,
          "Whether clients may add schema versions.", (200, 404)),
    Route("POST", f"{NAMESPACE}/isAllowAutoUpdateSchema", set_auto_update,
          "Allow or refuse new schema versions from clients.", (204, 400, 404), "true or false"),
    Route("GET", f"{NAMESPACE}/schemaValidationEnforced", get_validation,
          "Whether producers without a schema are refused on topics with one.", (200, 404)),
    Route("POST", f"{NAMESPACE}/schemaValidationEnforced", set_validation,
          "Enforce schema validation, or not.", (204, 400, 404), "true or false"),
    Route("GET", f"{TOPIC}/schemaCompatibilityStrategy", get_topic_strategy,
          "The topic's strategy (null: unset; applied=true: the one in force).", (200, 404), query=("applied",)),
    Route("PUT", f"{TOPIC}/schemaCompatibilityStrategy", set_topic_strategy, "Set the topic's strategy.",
          (204, 400, 404), STRATEGY),
    Route("DELETE", f"{TOPIC}/schemaCompatibilityStrategy", remove_topic_strategy, "Remove the topic's strategy.",
          (204, 404)),
    Route("GET", f"{TOPIC}/schemaValidationEnforced", get_topic_validation,
          "The topic's schema validation (null: unset; applied=true: in force).", (200, 404), query=("applied",)),
    Route("POST", f"{TOPIC}/schemaValidationEnforced", set_topic_validation, "Set the topic's schema validation.",
          (204, 400, 404), "true or false"),
    Route("DELETE", f"{TOPIC}/schemaValidationEnforced", remove_topic_validation,
          "Remove the topic's schema validation.", (204, 404)),
]
