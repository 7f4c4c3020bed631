"""The catalog's side of a shared configuration store: each change to a shared entity (clusters, tenants,
namespaces with their policies and permissions, partitioned topics) is told before it commits, and a listener's
refusal rolls it back; changes applied from the store are told to nobody; the listing the store starts from."""

from __future__ import annotations

import pytest

from seglog.catalog.metadata import Metadata, SharedChange
from seglog.catalog.policies import Policies
from seglog.errors import ConfigurationStoreError, InvalidArgumentError
from seglog.names import NamespaceName, TopicName


@pytest.fixture
def metadata(tmp_path):
    store = Metadata(tmp_path / "meta.sqlite")
    yield store
    store.close()


def _told(metadata: Metadata) -> list[SharedChange]:
    told: list[SharedChange] = []
    metadata.on_shared_change(told.append)
    return told


def test_each_change_to_a_shared_entity_is_told_with_its_value(metadata):
    told = _told(metadata)
    metadata.create_cluster("east", {"serviceUrl": "http://e:8080"})
    metadata.create_tenant("acme", {"allowed_clusters": None})
    ns = NamespaceName.parse("acme/orders")
    metadata.create_namespace(ns, Policies(message_ttl_ms=1000))
    metadata.set_namespace_permission(ns, "reader", ["consume"])
    metadata.create_topic(TopicName.parse("acme/orders/p"), 3, {}, 0)
    metadata.create_topic(TopicName.parse("acme/orders/single"), 1, {}, 0)  # not partitioned: not shared
    metadata.grow_topic(TopicName.parse("acme/orders/p"), 4)
    metadata.delete_topic(TopicName.parse("acme/orders/p"))
    metadata.delete_cluster("east")
    assert told == [
        SharedChange("cluster", "east", {"serviceUrl": "http://e:8080"}),
        SharedChange("tenant", "acme", {"allowed_clusters": None}),
        SharedChange("namespace", "acme/orders", {"policies": Policies(message_ttl_ms=1000).to_json(),
                                                  "permissions": {}}),
        SharedChange("namespace", "acme/orders", {"policies": Policies(message_ttl_ms=1000).to_json(),
                                                  "permissions": {"reader": ["consume"]}}),
        SharedChange("topic", "acme/orders/p", {"partitions": 3}),
        SharedChange("topic", "acme/orders/p", {"partitions": 4}),
        SharedChange("topic", "acme/orders/p", None),
        SharedChange("cluster", "east", None),
    ]


def test_a_topic_made_in_a_new_namespace_tells_its_tenant_and_namespace_first(metadata):
    told = _told(metadata)
    metadata.create_topic(TopicName.parse("new/ns/p"), 2, {}, 0)
    assert [(change.kind, change.key) for change in told] == [("tenant", "new"), ("namespace", "new/ns"),
                                                              ("topic", "new/ns/p")]


def test_a_listener_that_refuses_rolls_the_change_back(metadata):
    def refuse(change: SharedChange) -> None:
        raise ConfigurationStoreError("the store is down")
    metadata.on_shared_change(refuse)
    with pytest.raises(ConfigurationStoreError):
        metadata.create_tenant("acme", {})
    with pytest.raises(ConfigurationStoreError):
        metadata.set_namespace_policies(NamespaceName.parse("public/default"), Policies(message_ttl_ms=5))
    assert metadata.tenants() == ["public"]
    assert metadata.namespace_policies("public/default") == Policies()


def test_changes_applied_from_the_store_are_told_to_nobody_and_say_whether_they_changed_anything(metadata):
    told = _told(metadata)
    value = {"policies": Policies(message_ttl_ms=7000).to_json(), "permissions": {"app": ["produce"]}}
    assert metadata.apply_shared(SharedChange("namespace", "acme/orders", value))
    assert not metadata.apply_shared(SharedChange("namespace", "acme/orders", value))
    assert metadata.tenants() == ["acme", "public"]  # (made for its namespace; its own change follows)
    assert metadata.namespace_permissions("acme/orders") == {"app": ["produce"]}
    assert metadata.apply_shared(SharedChange("cluster", "west", {"serviceUrl": "http://w:8080"}))
    assert metadata.apply_shared(SharedChange("tenant", "acme", {"allowed_clusters": ["west"]}))
    assert metadata.tenant_config("acme") == {"allowed_clusters": ["west"]}
    with metadata.applying_shared():
        metadata.create_topic(TopicName.parse("acme/orders/p"), 2, {}, 0)
    assert metadata.apply_shared(SharedChange("tenant", "acme", None))  # its namespaces go with it
    assert metadata.namespaces() == ["public/default"]
    assert told == []
    with pytest.raises(InvalidArgumentError, match="broker"):
        metadata.apply_shared(SharedChange("topic", "acme/orders/p", None))


def test_the_shared_entities_are_listed_each_kind_after_those_it_names(metadata):
    metadata.create_cluster("east", {})
    metadata.create_topic(TopicName.parse("acme/orders/p"), 2, {}, 0)
    metadata.create_topic(TopicName.parse("acme/orders/single"), 1, {}, 0)
    assert [(change.kind, change.key) for change in metadata.shared_entities()] == [
        ("cluster", "east"), ("tenant", "acme"), ("tenant", "public"), ("namespace", "acme/orders"),
        ("namespace", "public/default"), ("topic", "acme/orders/p")]
    assert metadata.joined_store() is None
    metadata.record_joined_store("0123")
    assert metadata.joined_store() == "0123"
