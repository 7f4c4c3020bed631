"""`seglog tenants` and `seglog clusters`."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

import seglog
from helpers_cli import one_line, run


def test_tenants_create_list_delete(runner: CliRunner, data: Path) -> None:
    assert "Created tenant acme" in run(runner, data, "tenants", "create", "acme").output  # creates the directory
    run(runner, data, "clusters", "create", "us-east")
    run(runner, data, "clusters", "create", "eu-west")
    run(runner, data, "tenants", "create", "geo", "--allowed-clusters", "us-east, eu-west")
    assert run(runner, data, "tenants", "list").stdout == "acme\ngeo\npublic\n"
    with seglog.open(data) as log:
        listed = log.admin.tenants.list()
        assert log.admin.tenants.get("geo") == {"adminRoles": [], "allowedClusters": ["us-east", "eu-west"]}
        assert log.admin.tenants.get("acme") == {"adminRoles": [], "allowedClusters": None}
    assert json.loads(run(runner, data, "tenants", "list", "--json").output) == listed == ["acme", "geo", "public"]

    assert "Deleted tenant geo" in run(runner, data, "tenants", "delete", "geo").output
    with seglog.open(data) as log:
        assert log.admin.tenants.list() == ["acme", "public"]


def test_tenants_refusals(runner: CliRunner, data: Path) -> None:
    message = one_line(run(runner, data, "tenants", "create", "no spaces", code=2).output)
    assert "Error: Invalid value for 'NAME': invalid tenant name 'no spaces'" in message
    assert "accepted: 1 to 255 characters" in message
    message = one_line(run(runner, data, "tenants", "create", "acme", "-c", "a,,b", code=2).output)
    assert "Invalid value for '--allowed-clusters' / '-c': 'a,,b' is not a comma-separated list" in message
    assert not data.exists()

    run(runner, data, "tenants", "create", "acme")
    assert "Error: tenant acme already exists" in run(runner, data, "tenants", "create", "acme", code=1).output
    assert "Error: tenant nope does not exist" in run(runner, data, "tenants", "delete", "nope", code=2).output
    message = one_line(run(runner, data, "tenants", "delete", "public", code=2).output)
    assert "Invalid value for 'NAME'" in message and "a tenant other than 'public'" in message
    with seglog.open(data) as log:
        log.admin.namespaces.create("acme/billing")
    message = one_line(run(runner, data, "tenants", "delete", "acme", code=1).output)
    assert "Error: tenant acme still has namespaces: acme/billing; delete them first" in message
    assert "Traceback" not in message
    assert run(runner, data, "tenants", "list").stdout == "acme\npublic\n"


def test_tenants_get(runner: CliRunner, data: Path) -> None:
    run(runner, data, "clusters", "create", "us-east")
    run(runner, data, "clusters", "create", "eu-west")
    run(runner, data, "tenants", "create", "geo", "-c", "us-east,eu-west")
    assert json.loads(run(runner, data, "tenants", "get", "geo").output) == {"adminRoles": [],
                                                                          "allowedClusters": ["us-east", "eu-west"]}
    assert json.loads(run(runner, data, "tenants", "get", "public").output) == {"adminRoles": [],
                                                                                "allowedClusters": None}
    assert "Error: tenant nope does not exist" in run(runner, data, "tenants", "get", "nope", code=2).output

