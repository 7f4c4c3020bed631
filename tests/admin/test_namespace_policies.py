"""log.admin.namespaces.policies: Pulsar's Policies document, the one the CLI prints (`seglog namespaces
policies`, on a data directory or a server) and GET /admin/v2/namespaces/{tenant}/{namespace} answers."""

import pytest

import seglog
from seglog.errors import NotFoundError


def test_policies_as_pulsar_names_them(tmp_path):
    with seglog.open(tmp_path / "d") as log:
        namespaces = log.admin.namespaces
        assert namespaces.policies("public/default") == {
            "retention_policies": None, "message_ttl_in_seconds": None, "backlog_quota_map": {},
            "replication_clusters": [], "allowed_clusters": [],
            "auth_policies": {"namespace_auth": {}, "destination_auth": {}, "subscription_auth_roles": {}},
            "autoTopicCreationOverride": None, "compaction_threshold": None, "deleted": False}
        log.admin.tenants.create("acme")
        namespaces.create("acme/ns")
        namespaces.set_retention("acme/ns", size="10G", time="3h")
        namespaces.set_message_ttl("acme/ns", "2h")
        namespaces.set_backlog_quota("acme/ns", limit="2G", policy="producer_exception")
        namespaces.set_backlog_quota("acme/ns", limit_time=3600, type="message_age")
        namespaces.grant_permission("acme/ns", "app", ["produce"])
        namespaces.set_auto_topic_creation("acme/ns", True, "partitioned", 3)
        policies = namespaces.policies("acme/ns")
        assert policies["retention_policies"] == {"retentionTimeInMinutes": 180, "retentionSizeInMB": 10240}
        assert policies["message_ttl_in_seconds"] == 7200
        assert policies["backlog_quota_map"] == {
            "destination_storage": {"limitSize": 2 << 30, "limitTime": -1, "policy": "producer_exception"},
            "message_age": {"limitSize": -1, "limitTime": 3600, "policy": "producer_request_hold"}}
        assert policies["auth_policies"]["namespace_auth"] == {"app": ["produce"]}
        assert policies["autoTopicCreationOverride"] == {"allowAutoTopicCreation": True, "topicType": "partitioned",
                                                         "defaultNumPartitions": 3}
        with pytest.raises(NotFoundError, match="^namespace acme/nope does not exist$"):
            namespaces.policies("acme/nope")
