"""A stored message as the admin REST API's JSON gives it (server/rest/messages.py), built from messages read
from a log in this process."""

from __future__ import annotations

import base64

import seglog
from seglog.server.rest.messages import message_json


def test_a_null_value_and_a_null_key_are_json_nulls(tmp_path):
    with seglog.open(tmp_path) as log:
        topic = log.create_topic("t")
        with topic.producer() as producer:
            producer.send(None)
            producer.send(b"v", key=b"k")
        with topic.reader() as reader:
            null, keyed = reader.read_messages(2)
    assert message_json(null)["value"] is None and message_json(null)["key"] is None
    assert message_json(keyed)["value"] == base64.b64encode(b"v").decode() == "dg=="
    assert message_json(keyed)["key"] == "aw=="
