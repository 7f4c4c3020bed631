"""/admin/v2/tenants: tenants and their TenantInfo (adminRoles, allowedClusters)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from seglog.server.rest.base import RestContext, Route, json_body, json_response, no_content, query_flag, tenant_of
from seglog.server.rest.errors import RestError

TENANTS = "/admin/v2/tenants"
TENANT = "/admin/v2/tenants/{tenant}"
TENANT_INFO = ('TenantInfo: {"adminRoles": [...], "allowedClusters": [...]} (allowedClusters absent, null or empty: '
               'every cluster)')


def _tenant_info(body: Any) -> tuple[list[str] | None, list[str] | None]:
    if body is None:
        return None, None
    if not isinstance(body, dict):
        raise RestError(400, f"expected {TENANT_INFO}")
    unknown = sorted(set(body) - {"adminRoles", "allowedClusters"})
    if unknown:
        raise RestError(400, f"unknown TenantInfo field(s) {', '.join(unknown)}; expected {TENANT_INFO}")
    return body.get("allowedClusters"), body.get("adminRoles")


async def list_tenants(request: web.Request, ctx: RestContext) -> web.Response:
    return json_response(await ctx.blocking(ctx.admin.tenants.list))


async def get_tenant(request: web.Request, ctx: RestContext) -> web.Response:
    return json_response(await ctx.blocking(ctx.admin.tenants.get, tenant_of(request)))


async def _set(ctx: RestContext, method: Any, tenant: str, body: Any) -> web.Response:
    clusters, roles = _tenant_info(body)
    await ctx.blocking(method, tenant, clusters, admin_roles=roles)
    return no_content()


async def create_tenant(request: web.Request, ctx: RestContext) -> web.Response:
    return await _set(ctx, ctx.admin.tenants.create, tenant_of(request),
                      await json_body(request, TENANT_INFO, optional=True))


async def update_tenant(request: web.Request, ctx: RestContext) -> web.Response:
    return await _set(ctx, ctx.admin.tenants.update, tenant_of(request), await json_body(request, TENANT_INFO))


async def delete_tenant(request: web.Request, ctx: RestContext) -> web.Response:
    if query_flag(request, "force"):
        raise RestError(405, "force deletion of a tenant is not supported: delete its namespaces first")
    await ctx.blocking(ctx.admin.tenants.delete, tenant_of(request))
    return no_content()


ROUTES = [
    Route("GET", TENANTS, list_tenants, "The tenants' names, sorted."),
    Route("GET", TENANT, get_tenant, "A tenant's TenantInfo.", (200, 404, 412)),
    Route("PUT", TENANT, create_tenant, "Create a tenant.", (204, 400, 409, 412), TENANT_INFO),
    Route("POST", TENANT, update_tenant, "Replace a tenant's TenantInfo; 412 when it would drop a cluster a "
                                         "namespace uses.", (204, 400, 404, 412), TENANT_INFO),
    Route("DELETE", TENANT, delete_tenant, "Delete a tenant without namespaces.", (204, 404, 405, 409, 412),
          query=("force",)),
]
