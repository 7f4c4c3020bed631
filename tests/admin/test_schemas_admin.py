"""log.admin.schemas as pulsar-admin's schemas: a KEY_VALUE schema uploaded as Pulsar's JSON of its two definitions
is kept in Pulsar's encoding (each definition's compact JSON after its big-endian length; "" for a primitive
part), shown back as that JSON, and found again by version_of; a definition that is not that JSON is refused
naming the form accepted, and nothing is kept."""

from __future__ import annotations

import json
import struct

import pytest

import seglog
from seglog.errors import InvalidSchemaError

RECORD = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
KEY_VALUE = json.dumps({"key": "", "value": RECORD})
PROPERTIES = {"key.schema.type": "STRING", "value.schema.type": "AVRO", "kv.encoding.type": "SEPARATED"}


@pytest.fixture
def admin(tmp_path):
    with seglog.open(tmp_path / "log", background=False) as log:
        log.create_topic("orders")
        yield log.admin


def test_a_key_value_schema_uploaded_as_json_is_kept_as_pulsar_encodes_it(admin):
    assert admin.schemas.create("orders", "KEY_VALUE", KEY_VALUE, PROPERTIES) == 0
    shown = admin.schemas.get("orders")
    assert (shown["type"], json.loads(shown["data"])) == ("KEY_VALUE", {"key": "", "value": RECORD})
    value = json.dumps(RECORD, separators=(",", ":")).encode()
    kept = admin.schemas.version_of("orders", "KEY_VALUE", struct.pack(">i", 0) + struct.pack(">i", len(value))
                                    + value, PROPERTIES)
    assert kept == 0  # the binary form Pulsar's clients register is the same schema
    assert admin.schemas.version_of("orders", "KEY_VALUE", KEY_VALUE, PROPERTIES) == 0


@pytest.mark.parametrize("definition", ["not json", json.dumps({"key": ""}), json.dumps([1, 2])])
def test_a_key_value_definition_not_of_that_form_is_refused(admin, definition):
    with pytest.raises(InvalidSchemaError, match='"key": <definition>, "value": <definition>'):
        admin.schemas.create("orders", "KEY_VALUE", definition, PROPERTIES)
    assert admin.schemas.versions("orders") == []
