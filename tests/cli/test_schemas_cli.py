"""`seglog schemas get|upload|delete|compatibility` and the schema policy commands of `seglog namespaces` and
`seglog topics`: on a data directory, and with --url on a `seglog serve` (each command answering as it does on
a data directory)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import seglog
from helpers_cli import make_data, one_line, run
from helpers_server import start_server
from seglog.cli import main

RECORD = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
# a field without a default: old data cannot be read with it (not BACKWARD), new data can be read without it
WITH_AMOUNT = {**RECORD, "fields": [*RECORD["fields"], {"name": "amount", "type": "double"}]}
WITH_NOTE = {**RECORD, "fields": [*RECORD["fields"], {"name": "note", "type": "string", "default": ""}]}


def schema_file(folder: Path, name: str, definition: dict | None, kind: str = "AVRO", **extra: object) -> Path:
    """A schema file as pulsar-admin's: the definition as a string."""
    path = folder / f"{name}.json"
    document = {"type": kind, "schema": "" if definition is None else json.dumps(definition), **extra}
    path.write_text(json.dumps(document))
    return path


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    folder = tmp_path / "schemas"
    folder.mkdir()
    return {"order": str(schema_file(folder, "order", RECORD, properties={"team": "billing"})),
            "amount": str(schema_file(folder, "amount", WITH_AMOUNT)),
            "note": str(schema_file(folder, "note", WITH_NOTE)),
            "string": str(schema_file(folder, "string", None, "STRING"))}


def test_upload_get_and_versions(runner: CliRunner, data: Path, files: dict[str, str]) -> None:
    make_data(data)
    assert run(runner, data, "schemas", "upload", "orders", "--filename", files["order"]).stdout == (
        "Uploaded schema of public/default/orders: version 0\n")
    assert run(runner, data, "schemas", "upload", "orders", "-f", files["order"]).stdout == (
        "Schema of public/default/orders unchanged: equal to version 0\n")
    assert "version 1" in run(runner, data, "schemas", "upload", "orders", "-f", files["note"]).stdout

    latest = json.loads(run(runner, data, "schemas", "get", "orders").stdout)
    with seglog.open(data) as log:
        assert latest == log.admin.schemas.get("orders")
        every = log.admin.schemas.versions("orders")
    assert latest["version"] == 1 and latest["type"] == "AVRO" and json.loads(latest["data"]) == WITH_NOTE
    first = json.loads(run(runner, data, "schemas", "get", "persistent://public/default/orders", "-v", "0").stdout)
    assert first["properties"] == {"team": "billing"} and json.loads(first["data"]) == RECORD
    assert json.loads(run(runner, data, "schemas", "get", "orders", "--all-version").stdout) == every
    assert [v["version"] for v in every] == [0, 1]


def test_an_incompatible_upload_is_refused_and_changes_nothing(runner: CliRunner, data: Path,
                                                              files: dict[str, str]) -> None:
    make_data(data)
    run(runner, data, "schemas", "upload", "orders", "-f", files["order"])
    result = run(runner, data, "schemas", "upload", "orders", "-f", files["amount"], code=1)
    assert result.stdout == "" and len(result.stderr.splitlines()) == 1
    message = one_line(result.stderr)
    assert message.startswith(f"Error: public/default/orders refused the schema in {files['amount']}: "
                              "incompatible schema under FULL")
    assert message.endswith("accepted: a schema compatible with its versions under FULL, the strategy in force")
    refused_type = one_line(run(runner, data, "schemas", "upload", "orders", "-f", files["string"], code=1).stderr)
    assert "exists schema type AVRO (version 0), new schema type STRING" in refused_type
    with seglog.open(data) as log:
        assert [v["version"] for v in log.admin.schemas.versions("orders")] == [0]


def test_compatibility_prints_pulsars_answer_and_exits_1_when_incompatible(runner: CliRunner, data: Path,
                                                                          files: dict[str, str]) -> None:
    make_data(data)
    run(runner, data, "schemas", "upload", "orders", "-f", files["order"])
    yes = run(runner, data, "schemas", "compatibility", "orders", "-f", files["note"])
    assert json.loads(yes.stdout) == {"isCompatibility": True, "schemaCompatibilityStrategy": "FULL"}
    no = run(runner, data, "schemas", "compatibility", "orders", "--filename", files["amount"], code=1)
    assert json.loads(no.stdout) == {"isCompatibility": False, "schemaCompatibilityStrategy": "FULL"}
    assert no.stderr == (f"Error: the schema in {files['amount']} is not compatible with the schemas of "
                         "public/default/orders under FULL\n")
    run(runner, data, "topics", "create", "orders")
    run(runner, data, "topics", "set-schema-compatibility-strategy", "orders", "-s", "forward")
    forward = run(runner, data, "schemas", "test-compatibility", "orders", "-f", files["amount"])  # the 2.x name
    assert json.loads(forward.stdout) == {"isCompatibility": True, "schemaCompatibilityStrategy": "FORWARD"}
    with seglog.open(data) as log:
        assert len(log.admin.schemas.versions("orders")) == 1  # nothing uploaded


def test_delete_writes_a_tombstone_and_force_removes_every_version(runner: CliRunner, data: Path,
                                                                  files: dict[str, str]) -> None:
    make_data(data)
    run(runner, data, "schemas", "upload", "orders", "-f", files["order"])
    assert run(runner, data, "schemas", "delete", "orders").stdout == (
        "Deleted schema of public/default/orders (tombstone version 1)\n")
    missing = run(runner, data, "schemas", "get", "orders", code=2)
    assert missing.stderr == ("Error: schema of public/default/orders not found (none was given, or it was "
                              "deleted)\n")
    assert json.loads(run(runner, data, "schemas", "get", "orders", "-a").stdout) == []
    # a new history after the tombstone: the old schema no longer counts, so another type is accepted
    assert "version 2" in run(runner, data, "schemas", "upload", "orders", "-f", files["string"]).stdout
    assert run(runner, data, "schemas", "delete", "orders", "--force").stdout == (
        "Deleted every version of the schema of public/default/orders\n")
    assert "version 0" in run(runner, data, "schemas", "upload", "orders", "-f", files["order"]).stdout


@pytest.mark.parametrize(("content", "said"), [
    (None, "Invalid value for '--filename' / '-f': File '{path}' does not exist."),
    ("nope", "{path} is not JSON (Expecting value: line 1 column 1 (char 0)); accepted: Pulsar's schema file, "
             '{{"type": "AVRO", "schema": "<the definition as a string>", "properties": {{}}}}'),
    ('["AVRO"]', '{path} is not Pulsar\'s schema file (a JSON object with a "type"); accepted: {{"type": "AVRO", '),
    ('{"schema": ""}', '{path} is not Pulsar\'s schema file (a JSON object with a "type")'),
    ('{"type": "AVRO", "schema": {"type": "record"}}',
     '{path}: "schema" is a JSON object, not a string; accepted: the definition as a string'),
    ('{"type": "XML"}', "{path}: invalid schema type 'XML'; accepted: AVRO, JSON, PROTOBUF, PROTOBUF_NATIVE, "),
    ('{"type": "AVRO", "schema": "{\\"type\\": \\"recrod\\"}"}',
     "{path}: invalid schema definition '{{\"type\": \"recrod\"}}': Undefined type: recrod; accepted: an Avro "
     "schema's JSON"),
    ('{"type": "INT8", "schema": "x"}', "{path}: invalid INT8 schema definition 'x'; accepted: no definition"),
    ('{"type": "STRING", "properties": {"n": 1}}',
     '{path}: "properties" is not a JSON object of strings ({{"n": 1}}); accepted: {{"name": "value", ...}}'),
    (b"\xff\xfe", "{path} is not UTF-8 text; accepted: Pulsar's schema file"),
], ids=["missing", "not-json", "not-an-object", "no-type", "schema-not-a-string", "unknown-type", "bad-avro",
        "primitive-with-definition", "properties-not-strings", "not-utf8"])
@pytest.mark.parametrize("command", ["upload", "compatibility"])
def test_a_bad_schema_file_is_one_line_naming_the_file(runner: CliRunner, data: Path, tmp_path: Path,
                                                       content: str | bytes | None, said: str, command: str) -> None:
    make_data(data)
    path = tmp_path / "schema.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    result = run(runner, data, "schemas", command, "orders", "-f", str(path), code=2)
    error = result.stderr.splitlines()[-1]
    assert error.startswith("Error: ") and said.format(path=path) in error, error
    assert result.stdout == ""
    with seglog.open(data) as log:
        assert log.admin.schemas.versions("orders") == []


def test_get_refusals(runner: CliRunner, data: Path) -> None:
    make_data(data)
    both = run(runner, data, "schemas", "get", "orders", "-v", "0", "-a", code=2)
    assert "Error: give --version or --all-version, not both" in both.stderr
    negative = run(runner, data, "schemas", "get", "orders", "--version", "-1", code=2)
    assert "Error: Invalid value for '--version' / '-v': -1 is not in the range x>=0." in negative.stderr
    bad_name = one_line(run(runner, data, "schemas", "get", "a b", code=2).stderr)
    assert "Error: Invalid value for 'TOPIC': invalid topic name 'a b'" in bad_name
    no_namespace = run(runner, data, "schemas", "upload", "acme/nope/orders", "-f", __file__, code=2)
    assert "is not JSON" in no_namespace.stderr  # the file is read first: nothing is asked of the data directory


def test_namespace_schema_policies(runner: CliRunner, data: Path) -> None:
    make_data(data)
    ns = "public/default"
    assert run(runner, data, "namespaces", "get-schema-compatibility-strategy", ns).stdout == "UNDEFINED\n"
    assert run(runner, data, "namespaces", "set-schema-compatibility-strategy", ns, "--compatibility",
               "backward_transitive").stdout == (
        "Set schema compatibility strategy of public/default: BACKWARD_TRANSITIVE\n")
    assert run(runner, data, "namespaces", "get-schema-compatibility-strategy", ns).stdout == "BACKWARD_TRANSITIVE\n"
    assert run(runner, data, "namespaces", "set-schema-compatibility-strategy", ns, "-c", "UNDEFINED").stdout == (
        "Set schema compatibility strategy of public/default: UNDEFINED (the broker's default, FULL, applies)\n")

    assert run(runner, data, "namespaces", "get-is-allow-auto-update-schema", ns).stdout == "true\n"
    assert run(runner, data, "namespaces", "set-is-allow-auto-update-schema", ns, "--disable").stdout == (
        "Set isAllowAutoUpdateSchema of public/default: false (only an upload adds a schema version)\n")
    assert run(runner, data, "namespaces", "get-is-allow-auto-update-schema", ns).stdout == "false\n"

    assert run(runner, data, "namespaces", "get-schema-validation-enforce", ns).stdout == "false\n"
    run(runner, data, "namespaces", "set-schema-validation-enforce", ns, "-e")
    assert run(runner, data, "namespaces", "get-schema-validation-enforce", ns, "-ap").stdout == "true\n"
    with seglog.open(data) as log:
        assert log.admin.schemas.get_allow_auto_update(ns) is False
        assert log.admin.schemas.get_validation_enforced(ns) is True


def test_namespace_schema_policy_refusals(runner: CliRunner, data: Path) -> None:
    make_data(data)
    wrong = one_line(run(runner, data, "namespaces", "set-schema-compatibility-strategy", "public/default", "-c",
                         "LOOSE", code=2).stderr)
    assert ("Error: Invalid value for '--compatibility' / '-c': invalid schema compatibility strategy 'LOOSE'; "
            "accepted: ALWAYS_INCOMPATIBLE, ALWAYS_COMPATIBLE, BACKWARD, FORWARD, FULL, BACKWARD_TRANSITIVE, "
            "FORWARD_TRANSITIVE, FULL_TRANSITIVE, UNDEFINED") in wrong
    assert "Missing option '--compatibility' / '-c'" in run(
        runner, data, "namespaces", "set-schema-compatibility-strategy", "public/default", code=2).stderr
    for command in ("set-is-allow-auto-update-schema", "set-schema-validation-enforce"):
        assert "Missing option '--enable' / '-e'" in run(runner, data, "namespaces", command, "public/default",
                                                         code=2).stderr
    for command in ("get-schema-compatibility-strategy", "get-is-allow-auto-update-schema",
                    "get-schema-validation-enforce"):
        assert run(runner, data, "namespaces", command, "public/nope", code=2).stderr == (
            "Error: namespace public/nope does not exist\n")
    with seglog.open(data) as log:
        assert log.admin.schemas.get_compatibility_strategy("public/default") == "UNDEFINED"


def test_topic_schema_policies_over_the_namespaces(runner: CliRunner, data: Path, files: dict[str, str]) -> None:
    run(runner, data, "topics", "create", "orders")
    run(runner, data, "namespaces", "set-schema-compatibility-strategy", "public/default", "-c", "BACKWARD")
    assert run(runner, data, "topics", "get-schema-compatibility-strategy", "orders").stdout == "null\n"
    assert run(runner, data, "topics", "get-schema-compatibility-strategy", "orders", "--applied").stdout == (
        "BACKWARD\n")
    assert run(runner, data, "topics", "set-schema-compatibility-strategy", "orders", "--strategy",
               "always_compatible").stdout == (
        "Set schema compatibility strategy of public/default/orders: ALWAYS_COMPATIBLE\n")
    run(runner, data, "schemas", "upload", "orders", "-f", files["order"])
    assert "version 1" in run(runner, data, "schemas", "upload", "orders", "-f", files["string"]).stdout
    assert run(runner, data, "topics", "remove-schema-compatibility-strategy", "orders").stdout == (
        "Removed schema compatibility strategy of public/default/orders: BACKWARD applies\n")
    assert run(runner, data, "topics", "get-schema-compatibility-strategy", "orders", "-ap").stdout == "BACKWARD\n"
    wrong = one_line(run(runner, data, "topic", "set-schema-compatibility-strategy", "orders", "-s", "x",
                         code=2).stderr)
    assert "Error: Invalid value for '--strategy' / '-s': invalid schema compatibility strategy 'x'" in wrong

    assert run(runner, data, "topics", "get-schema-validation-enforce", "orders").stdout == "null\n"
    run(runner, data, "namespaces", "set-schema-validation-enforce", "public/default", "--enable")
    assert run(runner, data, "topics", "set-schema-validation-enforce", "orders", "--disable").stdout == (
        "Set schema validation enforced of public/default/orders: false\n")
    assert run(runner, data, "topics", "get-schema-validation-enforce", "orders", "-ap").stdout == "false\n"
    assert run(runner, data, "topics", "remove-schema-validation-enforce", "orders").stdout == (
        "Removed schema validation enforced of public/default/orders: true applies\n")
    assert run(runner, data, "topics", "get-schema-validation-enforce", "orders").stdout == "null\n"
    assert "Error: topic public/default/nope does not exist" in run(
        runner, data, "topics", "set-schema-validation-enforce", "nope", "-e", code=2).stderr


# with --url: every schema command answers on a server as on a data directory

STEPS: list[tuple[str, ...]] = [
    ("schemas", "get", "orders"), ("schemas", "get", "orders", "-a"),
    ("schemas", "upload", "orders", "-f", "{order}"), ("schemas", "upload", "orders", "-f", "{order}"),
    ("schemas", "upload", "orders", "-f", "{amount}"), ("schemas", "upload", "orders", "-f", "{string}"),
    ("schemas", "upload", "orders", "-f", "{bad}"), ("schemas", "upload", "nope/ns/t", "-f", "{order}"),
    ("schemas", "compatibility", "orders", "-f", "{note}"), ("schemas", "compatibility", "orders", "-f", "{amount}"),
    ("schemas", "test-compatibility", "orders", "-f", "{amount}"),
    ("schemas", "upload", "orders", "-f", "{note}"), ("schemas", "get", "orders"),
    ("schemas", "get", "orders", "-v", "0"), ("schemas", "get", "orders", "-v", "7"),
    ("schemas", "get", "orders", "--all-version"),
    ("schemas", "delete", "orders"), ("schemas", "get", "orders"), ("schemas", "get", "orders", "-a"),
    ("schemas", "upload", "orders", "-f", "{string}"), ("schemas", "delete", "orders", "-f"),
    ("schemas", "get", "orders", "-a"),
    ("namespaces", "get-schema-compatibility-strategy", "public/default"),
    ("namespaces", "set-schema-compatibility-strategy", "public/default", "-c", "forward"),
    ("namespaces", "set-schema-compatibility-strategy", "public/default", "-c", "nope"),
    ("namespaces", "get-schema-compatibility-strategy", "public/default"),
    ("namespaces", "get-schema-compatibility-strategy", "public/nope"),
    ("namespaces", "get-is-allow-auto-update-schema", "public/default"),
    ("namespaces", "set-is-allow-auto-update-schema", "public/default", "-d"),
    ("namespaces", "get-is-allow-auto-update-schema", "public/default"),
    ("namespaces", "set-is-allow-auto-update-schema", "public/nope", "-e"),
    ("namespaces", "get-schema-validation-enforce", "public/default"),
    ("namespaces", "set-schema-validation-enforce", "public/default", "--enable"),
    ("namespaces", "get-schema-validation-enforce", "public/default", "--applied"),
    ("topics", "get-schema-compatibility-strategy", "orders"),
    ("topics", "get-schema-compatibility-strategy", "orders", "-ap"),
    ("topics", "set-schema-compatibility-strategy", "orders", "-s", "FULL_TRANSITIVE"),
    ("topics", "set-schema-compatibility-strategy", "orders", "-s", "wrong"),
    ("topics", "set-schema-compatibility-strategy", "nope", "-s", "FULL"),
    ("topics", "get-schema-compatibility-strategy", "orders"),
    ("topics", "remove-schema-compatibility-strategy", "orders"),
    ("topics", "get-schema-validation-enforce", "orders"),
    ("topics", "set-schema-validation-enforce", "orders", "-d"),
    ("topics", "get-schema-validation-enforce", "orders", "--applied"),
    ("topics", "remove-schema-validation-enforce", "orders"),
    ("topics", "get-schema-validation-enforce", "orders", "-ap"),
]


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory):
    """(the local data directory, the server of its copy, the schema files by name)."""
    root = tmp_path_factory.mktemp("schemas-url")
    local = root / "local"
    with seglog.open(local) as log:
        log.create_topic("orders")
    shutil.copytree(local, root / "served")
    files = {"order": schema_file(root, "order", RECORD, properties={"team": "billing"}),
             "amount": schema_file(root, "amount", WITH_AMOUNT), "note": schema_file(root, "note", WITH_NOTE),
             "string": schema_file(root, "string", None, "STRING"), "bad": schema_file(root, "bad", None, "XML")}
    server = start_server(root / "served")
    yield local, server, {name: str(path) for name, path in files.items()}
    server.stop()


def _run(*args: str):
    runner = CliRunner(env={"SEGLOG_DATA": None, "SEGLOG_URL": None, "COLUMNS": "200", "NO_COLOR": "1"})
    return runner.invoke(main, list(args), catch_exceptions=False)


def _without_timestamps(output: str) -> str:
    """A schema's timestamp is when it was uploaded: left out of the comparison."""
    try:
        document = json.loads(output)
    except ValueError:
        return output
    versions = document if isinstance(document, list) else [document]
    for version in versions:
        if isinstance(version, dict):
            version.pop("timestamp", None)
    return json.dumps(document)


@pytest.mark.parametrize("step", STEPS, ids=" ".join)
def test_each_schema_command_answers_the_same_on_a_server(both, step: tuple[str, ...]) -> None:
    local, server, files = both
    args = [arg.format(**files) for arg in step]
    on_data = _run("--data", str(local), *args)
    on_url = _run("--url", server.http_url, *args)
    assert "No such command" not in on_data.output
    assert on_url.exit_code == on_data.exit_code, (on_data.output, on_url.output)
    assert _without_timestamps(on_url.stdout) == _without_timestamps(on_data.stdout)
    assert on_url.stderr == on_data.stderr


def test_every_schema_command_is_compared() -> None:
    groups = {"schemas": main.commands["schemas"], "namespaces": main.commands["namespaces"],
              "topics": main.commands["topics"]}
    schema_commands = {(group, name) for group, command in groups.items() for name in command.commands
                       if group == "schemas" or "schema" in name}
    assert schema_commands - {step[:2] for step in STEPS} == set()
