"""`seglog schemas get|upload|delete|compatibility TOPIC`: topics' schemas, as pulsar-admin's `schemas`, and the
schema policies with pulsar-admin's command names: a namespace's (NAMESPACE_COMMANDS, under `seglog
namespaces`) and a topic's (TOPIC_COMMANDS, under `seglog topics`, as pulsar-admin's topicPolicies and
topics have them). Each calls the admin API's `schemas` (data.admin(): a data directory's, or a server's).

Schemas print as Pulsar's JSON (GetSchemaResponse); the policy getters print the bare value pulsar-admin
prints (a strategy's name, true or false, null when the topic sets none). A schema file is pulsar-admin's
(`--filename`), Pulsar's PostSchemaPayload as JSON; what is wrong in it is said of the file, exit code 2."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from seglog.catalog.schemas import DEFAULT_STRATEGY, STRATEGIES, UNDEFINED, SchemaInfo
from seglog.cli.base import AdminCommand, AdminGroup
from seglog.cli.datadir import DataDir, pass_data
from seglog.cli.errors import CliFailure, UsageProblem, shown
from seglog.cli.options import namespace_name, topic_name
from seglog.cli.output import out, print_json
from seglog.errors import IncompatibleSchemaError, InvalidArgumentError

SCHEMA_FILE = '{"type": "AVRO", "schema": "<the definition as a string>", "properties": {}}'
STRATEGY_NAMES = ", ".join((*STRATEGIES, UNDEFINED))

_TOPIC = click.argument("topic", metavar="TOPIC")
_NAMESPACE = click.argument("namespace", metavar="TENANT/NAMESPACE")
_JSON_KINDS = {dict: "object", list: "array", int: "number", float: "number", bool: "boolean"}
_APPLIED = click.option("--applied", "-ap", is_flag=True, help="The value in force, whichever level set it.")


@dataclass(frozen=True)
class SchemaFile:
    """A schema file as read: where it is, and the PostSchemaPayload it holds (checked)."""
    path: Path
    type: str
    schema: str
    properties: dict[str, str]

    def payload(self) -> dict[str, Any]:
        """The admin API's arguments (type, schema, properties)."""
        return {"type": self.type, "schema": self.schema, "properties": self.properties}


def _schema_file(ctx: click.Context, param: click.Parameter, path: Path | None) -> SchemaFile | None:
    """The schema in the file named by --filename, each part checked as the admin API checks it, so that what is
    wrong is said of the file before anything is asked of the data directory or the server."""
    if path is None:
        return None
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise click.BadParameter(f"{path} is not UTF-8 text; accepted: Pulsar's schema file, {SCHEMA_FILE}",
                                 ctx, param) from None
    except ValueError as error:
        raise click.BadParameter(f"{path} is not JSON ({error}); accepted: Pulsar's schema file, {SCHEMA_FILE}",
                                 ctx, param) from None
    except OSError as error:
        raise click.BadParameter(f"{path}: {error.strerror or error}", ctx, param) from None
    if not isinstance(document, dict) or "type" not in document:
        raise click.BadParameter(f"{path} is not Pulsar's schema file (a JSON object with a \"type\"); accepted: "
                                 f"{SCHEMA_FILE}", ctx, param)
    schema = "" if document.get("schema") is None else document["schema"]
    if not isinstance(schema, str):
        raise click.BadParameter(f"{path}: \"schema\" is a JSON {_JSON_KINDS.get(type(schema), 'value')}, not a "
                                 "string; accepted: the definition as a string, an Avro schema's JSON written as "
                                 "text (\"{\\\"type\\\": \\\"record\\\", ...}\"), as pulsar-admin's schema files "
                                 "have it",
                                 ctx, param)
    properties = document.get("properties") or {}
    if not isinstance(properties, dict) or not all(isinstance(value, str) for value in properties.values()):
        raise click.BadParameter(f"{path}: \"properties\" is not a JSON object of strings ({json.dumps(properties)}); "
                                 "accepted: {\"name\": \"value\", ...}", ctx, param)
    try:
        info = SchemaInfo.checked(document["type"], schema, properties)
    except InvalidArgumentError as error:  # (said as the command line says values: no Python bytes or dict)
        detail = f": {error.detail}" if error.detail else ""
        raise click.BadParameter(f"{path}: invalid {error.argument} {shown(error.value)}{detail}; accepted: "
                                 f"{error.accepted}", ctx, param) from None
    return SchemaFile(path, info.type, schema, dict(info.properties))


_FILENAME = click.option("--filename", "-f", "schema_file", required=True, metavar="FILE",
                         type=click.Path(exists=True, dir_okay=False, path_type=Path), callback=_schema_file,
                         help=f"Pulsar's schema file (JSON): {SCHEMA_FILE}.")


@click.group(cls=AdminGroup)
def schemas() -> None:
    """Get, upload, delete and test topics' schemas (pulsar-admin schemas).

    TOPIC is named as in `seglog topics`; its schema may be uploaded before the topic exists. A schema file
    is pulsar-admin's: {"type": "AVRO", "schema": "<definition>", "properties": {}}. The schema policies are
    under `seglog namespaces` and `seglog topics` (get-/set-schema-compatibility-strategy,
    get-/set-schema-validation-enforce, namespaces get-/set-is-allow-auto-update-schema).
    """


@schemas.command(short_help="Print the topic's schema as Pulsar's JSON.")
@_TOPIC
@click.option("--version", "-v", type=click.IntRange(min=0), metavar="N", help="This version. [default: the latest]")
@click.option("--all-version", "-a", "all_versions", is_flag=True,
              help="Every version since the schema was last deleted, oldest first, as a JSON list.")
@pass_data
@click.pass_context
def get(ctx: click.Context, data: DataDir, topic: str, version: int | None, all_versions: bool) -> None:
    """Print TOPIC's latest schema, or version N, as Pulsar's GetSchemaResponse: {"version", "type",
    "timestamp", "data" (the definition as text), "properties"}. A topic without a schema, or whose schema was
    deleted, is an error (exit code 2); with --all-version it prints []."""
    if version is not None and all_versions:
        raise UsageProblem("give --version or --all-version, not both", ctx)
    name = topic_name(topic)
    with data.admin() as admin:
        print_json(admin.schemas.versions(name) if all_versions else admin.schemas.get(name, version))


@schemas.command(short_help="Upload the schema of a schema file to the topic.")
@_TOPIC
@_FILENAME
@pass_data
def upload(data: DataDir, topic: str, schema_file: SchemaFile) -> None:
    """Upload the schema in FILE to TOPIC: a new version when it differs from the versions kept and is
    compatible with them under the strategy in force; the version kept when an equal schema is. An
    incompatible schema is refused (exit code 1), naming why.

    \b
    Example:
      seglog schemas upload acme/billing/orders --filename order-schema.json
    """
    name = topic_name(topic)
    with data.admin() as admin:
        kept = admin.schemas.version_of(name, **schema_file.payload())
        try:
            version = admin.schemas.create(name, **schema_file.payload())
        except IncompatibleSchemaError as error:
            strategy = admin.schemas.get_topic_compatibility_strategy(name, applied=True)
            raise CliFailure(f"{name} refused the schema in {schema_file.path}: {error}; accepted: a schema "
                             f"compatible with its versions under {strategy}, the strategy in force") from None
    if version == kept:
        out().print(f"Schema of {name} unchanged: equal to version {version}")
    else:
        out().print(f"[green]Uploaded schema[/] of {name}: version {version}")


@schemas.command(short_help="Delete the topic's schema.")
@_TOPIC
@click.option("--force", "-f", is_flag=True, help="Remove every version, not only mark the schema deleted.")
@pass_data
def delete(data: DataDir, topic: str, force: bool) -> None:
    """Delete TOPIC's schema, as Pulsar does: a new version marks it deleted (a tombstone), and the versions
    before it are no longer read nor checked against; the next upload starts a new history. With --force,
    every version is removed."""
    name = topic_name(topic)
    with data.admin() as admin:
        version = admin.schemas.delete(name, force=force)
    if version is None:
        out().print(f"[green]Deleted every version[/] of the schema of {name}")
    else:
        out().print(f"[green]Deleted schema[/] of {name} (tombstone version {version})")


@schemas.command(short_help="Whether a schema file could be uploaded (exit code 1 if not).")
@_TOPIC
@_FILENAME
@pass_data
def compatibility(data: DataDir, topic: str, schema_file: SchemaFile) -> None:
    """Test whether the schema in FILE could be uploaded to TOPIC now: prints Pulsar's IsCompatibilityResponse,
    {"isCompatibility": true or false, "schemaCompatibilityStrategy": the strategy in force}, and exits with
    code 1 when it could not (a line on stderr says so). Nothing is uploaded."""
    name = topic_name(topic)
    with data.admin() as admin:
        answer = admin.schemas.compatibility(name, **schema_file.payload())
    print_json(answer)
    if not answer["isCompatibility"]:
        raise CliFailure(f"the schema in {schema_file.path} is not compatible with the schemas of {name} under "
                         f"{answer['schemaCompatibilityStrategy']}")


schemas.add_command(compatibility, name="test-compatibility")  # pulsar-admin 2.x's name


def _strategy_option(*names: str) -> Any:
    # (the parameter's name is the admin API's argument, so a refusal names the option as typed)
    return click.option(*names, "schema_compatibility_strategy", required=True, metavar="STRATEGY",
                        help=f"{STRATEGY_NAMES} (any case); UNDEFINED removes it.")


def _enabled_option(what: str) -> Any:
    return click.option("--enable/--disable", "-e/-d", "enabled", required=True, help=what)


def _echo(value: Any) -> None:
    """A policy's value as pulsar-admin prints it: a strategy's name, true or false, null."""
    click.echo(value if isinstance(value, str) else json.dumps(value))


# a namespace's schema policies

@click.command(name="get-schema-compatibility-strategy", cls=AdminCommand,
               short_help="Print the namespace's schema compatibility strategy.")
@_NAMESPACE
@pass_data
def get_namespace_strategy(data: DataDir, namespace: str) -> None:
    """Print the schema compatibility strategy set on the namespace, as pulsar-admin does: its name, UNDEFINED
    when it sets none (then the broker's default, FULL, applies to its topics that set none)."""
    name = namespace_name(namespace)
    with data.admin() as admin:
        _echo(admin.schemas.get_compatibility_strategy(name))


@click.command(name="set-schema-compatibility-strategy", cls=AdminCommand,
               short_help="Set how the namespace's new schemas must relate to the old.")
@_NAMESPACE
@_strategy_option("--compatibility", "-c")
@pass_data
def set_namespace_strategy(data: DataDir, namespace: str, schema_compatibility_strategy: str) -> None:
    """Set the schema compatibility strategy of the namespace's topics (a topic's own wins): BACKWARD, a new
    schema reads data written with the latest; FORWARD, the latest reads data written with the new; FULL,
    both; their _TRANSITIVE forms check against every version; ALWAYS_COMPATIBLE accepts any schema,
    ALWAYS_INCOMPATIBLE none but those kept.

    \b
    Example:
      seglog namespaces set-schema-compatibility-strategy acme/billing --compatibility BACKWARD
    """
    name = namespace_name(namespace)
    with data.admin() as admin:
        admin.schemas.set_compatibility_strategy(name, schema_compatibility_strategy)
        shown = admin.schemas.get_compatibility_strategy(name)
    note = f" (the broker's default, {DEFAULT_STRATEGY}, applies)" if shown == UNDEFINED else ""
    out().print(f"[green]Set schema compatibility strategy[/] of {name}: {shown}{note}")


@click.command(name="get-is-allow-auto-update-schema", cls=AdminCommand,
               short_help="Print whether clients may add schema versions (true or false).")
@_NAMESPACE
@pass_data
def get_auto_update(data: DataDir, namespace: str) -> None:
    """Print whether producers and consumers may add new schema versions to the namespace's topics: true (the
    default) or false."""
    name = namespace_name(namespace)
    with data.admin() as admin:
        _echo(admin.schemas.get_allow_auto_update(name))


@click.command(name="set-is-allow-auto-update-schema", cls=AdminCommand,
               short_help="Let clients add schema versions (--enable), or not.")
@_NAMESPACE
@_enabled_option("Let clients add schema versions, or only use those kept.")
@pass_data
def set_auto_update(data: DataDir, namespace: str, enabled: bool) -> None:
    """Let producers and consumers add new (compatible) schema versions to the namespace's topics, or with
    --disable only use a schema a topic keeps: a new version then needs `seglog schemas upload`."""
    name = namespace_name(namespace)
    with data.admin() as admin:
        admin.schemas.set_allow_auto_update(name, enabled)
    what = "clients may add schema versions" if enabled else "only an upload adds a schema version"
    out().print(f"[green]Set isAllowAutoUpdateSchema[/] of {name}: {json.dumps(enabled)} ({what})")


@click.command(name="get-schema-validation-enforce", cls=AdminCommand,
               short_help="Print whether producers without a schema are refused (true or false).")
@_NAMESPACE
@_APPLIED
@pass_data
def get_namespace_validation(data: DataDir, namespace: str, applied: bool) -> None:
    """Print whether the namespace refuses producers without a schema on topics that have one: true, or false
    (the default). The namespace's value is the one in force on it, with --applied or without."""
    name = namespace_name(namespace)
    with data.admin() as admin:
        _echo(admin.schemas.get_validation_enforced(name))


@click.command(name="set-schema-validation-enforce", cls=AdminCommand,
               short_help="Refuse producers without a schema (--enable), or not.")
@_NAMESPACE
@_enabled_option("Refuse producers without a schema on topics with one, or accept them.")
@pass_data
def set_namespace_validation(data: DataDir, namespace: str, enabled: bool) -> None:
    """Refuse, or accept (the default), producers without a schema on the namespace's topics that have one
    (its topics that set none of their own)."""
    name = namespace_name(namespace)
    with data.admin() as admin:
        admin.schemas.set_validation_enforced(name, enabled)
    out().print(f"[green]Set schema validation enforced[/] of {name}: {json.dumps(enabled)}")


NAMESPACE_COMMANDS = (get_namespace_strategy, set_namespace_strategy, get_auto_update, set_auto_update,
                      get_namespace_validation, set_namespace_validation)


# a topic's own schema policies, over its namespace's

@click.command(name="get-schema-compatibility-strategy", cls=AdminCommand,
               short_help="Print the topic's schema compatibility strategy (or null).")
@_TOPIC
@_APPLIED
@pass_data
def get_topic_strategy(data: DataDir, topic: str, applied: bool) -> None:
    """Print the schema compatibility strategy set on TOPIC, null when it sets none; with --applied, the one in
    force: the topic's, else its namespace's, else the broker's default (FULL)."""
    name = topic_name(topic)
    with data.admin() as admin:
        _echo(admin.schemas.get_topic_compatibility_strategy(name, applied=applied))


@click.command(name="set-schema-compatibility-strategy", cls=AdminCommand,
               short_help="Set the topic's schema compatibility strategy.")
@_TOPIC
@_strategy_option("--strategy", "-s")
@pass_data
def set_topic_strategy(data: DataDir, topic: str, schema_compatibility_strategy: str) -> None:
    """Set TOPIC's own schema compatibility strategy, over its namespace's (UNDEFINED removes it)."""
    name = topic_name(topic)
    with data.admin() as admin:
        admin.schemas.set_topic_compatibility_strategy(name, schema_compatibility_strategy)
        shown = admin.schemas.get_topic_compatibility_strategy(name, applied=True)
    out().print(f"[green]Set schema compatibility strategy[/] of {name}: {shown}")


@click.command(name="remove-schema-compatibility-strategy", cls=AdminCommand,
               short_help="Remove the topic's schema compatibility strategy.")
@_TOPIC
@pass_data
def remove_topic_strategy(data: DataDir, topic: str) -> None:
    """Remove TOPIC's own strategy: its namespace's applies, else the broker's default (FULL)."""
    name = topic_name(topic)
    with data.admin() as admin:
        admin.schemas.set_topic_compatibility_strategy(name, None)
        shown = admin.schemas.get_topic_compatibility_strategy(name, applied=True)
    out().print(f"[green]Removed schema compatibility strategy[/] of {name}: {shown} applies")


@click.command(name="get-schema-validation-enforce", cls=AdminCommand,
               short_help="Print whether the topic refuses producers without a schema (or null).")
@_TOPIC
@_APPLIED
@pass_data
def get_topic_validation(data: DataDir, topic: str, applied: bool) -> None:
    """Print whether TOPIC refuses producers without a schema (true or false), null when it sets none; with
    --applied, the value in force: the topic's, else its namespace's."""
    name = topic_name(topic)
    with data.admin() as admin:
        _echo(admin.schemas.get_topic_validation_enforced(name, applied=applied))


@click.command(name="set-schema-validation-enforce", cls=AdminCommand,
               short_help="Refuse producers without a schema on the topic (--enable), or not.")
@_TOPIC
@_enabled_option("Refuse producers without a schema, or accept them.")
@pass_data
def set_topic_validation(data: DataDir, topic: str, enabled: bool) -> None:
    """Refuse, or accept, producers without a schema on TOPIC once it has one, over its namespace's setting."""
    name = topic_name(topic)
    with data.admin() as admin:
        admin.schemas.set_topic_validation_enforced(name, enabled)
    out().print(f"[green]Set schema validation enforced[/] of {name}: {json.dumps(enabled)}")


@click.command(name="remove-schema-validation-enforce", cls=AdminCommand,
               short_help="Remove the topic's schema validation setting.")
@_TOPIC
@pass_data
def remove_topic_validation(data: DataDir, topic: str) -> None:
    """Remove TOPIC's own schema validation setting: its namespace's applies."""
    name = topic_name(topic)
    with data.admin() as admin:
        admin.schemas.set_topic_validation_enforced(name, None)
        shown = admin.schemas.get_topic_validation_enforced(name, applied=True)
    out().print(f"[green]Removed schema validation enforced[/] of {name}: {json.dumps(shown)} applies")


TOPIC_COMMANDS = (get_topic_strategy, set_topic_strategy, remove_topic_strategy, get_topic_validation,
                  set_topic_validation, remove_topic_validation)
