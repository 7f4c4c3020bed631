"""End-to-end encryption through seglog serve with the real client (docs/SERVER.md, "End-to-end encryption"):
producers with encryption keys are accepted, their entries are stored as they came and go back to consumers
with their encryption fields, so a consumer with the private key decrypts them and one without it gets the
encrypted entry; acks of whole entries and of batch indexes, negative acks, Key_Shared routing and a restart
act on the entry's messages; nothing on disk holds the plaintext."""

from __future__ import annotations

import random
import time

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from test_consume import EARLIEST, assert_nothing_more, receive_all
from test_produce import read_all

from helpers_replication import replicate_namespace, start_clusters, stop_clusters
from helpers_server import pulsar, rest, start_server

TOPIC = "persistent://public/default/secret"
STATS = "/admin/v2/persistent/public/default/secret/stats"
KEY_NAME = "app-key"  # the name the producer gives its key (CryptoKeyReader reads the files it was made with)
CONSUME = pulsar.ConsumerCryptoFailureAction.CONSUME


@pytest.fixture(scope="module")
def key_files(tmp_path_factory) -> dict[str, pulsar.CryptoKeyReader]:
    """A CryptoKeyReader per RSA key size, of a key pair written as PEM files (pulsar-client's C++ core
    encrypts data keys with RSA only: an ECDSA key fails the producer's send with CryptoError, in the client)."""
    folder = tmp_path_factory.mktemp("keys")
    readers = {}
    for bits in (2048, 4096):
        key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
        (folder / f"{bits}.key").write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()))
        (folder / f"{bits}.pub").write_bytes(key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        readers[f"rsa-{bits}"] = pulsar.CryptoKeyReader(str(folder / f"{bits}.pub"), str(folder / f"{bits}.key"))
    return readers


def encrypted_producer(client, keys, **options):
    return client.create_producer(TOPIC, encryption_key=KEY_NAME, crypto_key_reader=keys, **options)


def send_batch(producer, values: list[bytes], **options) -> None:
    """`values` as one batch entry (the producer batches at most len(values) messages and is flushed)."""
    for value in values:
        producer.send_async(value, None, **options)
    producer.flush()


def batching(client, keys, size: int, **options):
    return encrypted_producer(client, keys, batching_enabled=True, batching_max_messages=size,
                              batching_max_publish_delay_ms=60_000, **options)


def backlog(server, subscription: str, expected: int) -> int:
    """The subscription's msgBacklog once it is `expected` (acks travel grouped), or after 10 s as it is."""
    deadline = time.monotonic() + 10
    while True:
        status, stats = rest(server.http_url, "GET", STATS)
        assert status == 200, stats
        value = stats["subscriptions"][subscription]["msgBacklog"]
        if value == expected or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


@pytest.mark.parametrize("kind, compression", [("rsa-2048", "LZ4"), ("rsa-4096", "ZSTD"), ("rsa-2048", "NONE")])
def test_a_consumer_with_the_private_key_receives_batches_and_messages_as_sent(server, key_files, kind, compression):
    keys = key_files[kind]
    client = server.client()
    consumer = client.subscribe(TOPIC, "s", crypto_key_reader=keys, initial_position=EARLIEST)
    codec = getattr(pulsar.CompressionType, compression)
    send_batch(batching(client, keys, 4, compression_type=codec),
               [f"batched-{i}".encode() for i in range(4)], partition_key="k", properties={"p": "1"})
    single = encrypted_producer(client, keys, batching_enabled=False, compression_type=codec)
    single.send(b"single", partition_key="k2", properties={"p": "2"}, event_timestamp=1234)
    single.send(b"x" * 10_000)

    received = receive_all(consumer, 6)
    assert [m.data() for m in received] == [f"batched-{i}".encode() for i in range(4)] + [b"single", b"x" * 10_000]
    assert [m.partition_key() for m in received[:5]] == ["k"] * 4 + ["k2"]
    assert [m.properties() for m in received[:5]] == [{"p": "1"}] * 4 + [{"p": "2"}]
    assert received[4].event_timestamp() == 1234
    # the batch is one entry (batch indexes 0..3 of entry 0), the others an entry each (offsets 4 and 5)
    ids = [(m.message_id().entry_id(), m.message_id().batch_index()) for m in received]
    assert ids == [(0, 0), (0, 1), (0, 2), (0, 3), (4, -1), (5, -1)]
    assert all(m.encryption_context() is not None and not m.encryption_context().is_decryption_failed()
               for m in received)
    assert_nothing_more(consumer)


def test_a_consumer_without_the_key_gets_each_entry_encrypted_with_its_fields(server, key_files):
    """crypto_failure_action=CONSUME: a batch arrives as one message, the encrypted payload, with the
    encryption context the producer sent (pulsar-client-python's test_encryption_failure)."""
    client = server.client()
    send_batch(batching(client, key_files["rsa-2048"], 3, compression_type=pulsar.CompressionType.LZ4),
               [b"a-1", b"a-2", b"a-3"])
    encrypted_producer(client, key_files["rsa-2048"], batching_enabled=False,
                       compression_type=pulsar.CompressionType.LZ4).send(b"alone")

    for consume in (client.subscribe(TOPIC, "raw", crypto_failure_action=CONSUME, initial_position=EARLIEST),
                    client.create_reader(TOPIC, pulsar.MessageId.earliest, crypto_failure_action=CONSUME)):
        receive = consume.receive if hasattr(consume, "receive") else consume.read_next
        batch, alone = receive(10_000), receive(10_000)
        for message, size, plain in ((batch, 3, b"a-1"), (alone, -1, b"alone")):
            context = message.encryption_context()
            assert context.is_decryption_failed() and context.batch_size() == size
            assert [key.key for key in context.keys()] == [KEY_NAME] and len(context.param()) > 0
            assert plain not in message.data() and len(message.data()) > len(plain)
        assert batch.encryption_context().compression_type() == pulsar.CompressionType.LZ4
        assert alone.encryption_context().uncompressed_message_size() == len(b"alone")


def test_the_data_directory_holds_no_plaintext(tmp_path, key_files):
    data = tmp_path / "data"
    server = start_server(data)
    secrets = [f"top-secret-{i:04d}-plaintext".encode() for i in range(20)]
    client = server.client()
    consumer = client.subscribe(TOPIC, "s", crypto_key_reader=key_files["rsa-2048"], initial_position=EARLIEST)
    send_batch(batching(client, key_files["rsa-2048"], 10), secrets[:10], properties={"visible": "yes"})
    single = encrypted_producer(client, key_files["rsa-2048"], batching_enabled=False)
    for secret in secrets[10:]:
        single.send(secret)
    client.create_producer(TOPIC, batching_enabled=False).send(b"plain-and-visible")
    assert [m.data() for m in receive_all(consumer, 21)] == secrets + [b"plain-and-visible"]
    assert server.stop() == 0

    stored = b"".join(path.read_bytes() for path in sorted(data.rglob("*")) if path.is_file())
    assert b"plain-and-visible" in stored  # (the search finds what is there)
    assert [s for s in secrets if s in stored] == []


def test_acks_of_whole_entries_and_of_batch_indexes_leave_the_messages_not_acknowledged(server, key_files):
    keys = key_files["rsa-2048"]
    client = server.client()
    by_index = client.subscribe(TOPIC, "by-index", crypto_key_reader=keys, batch_index_ack_enabled=True,
                                consumer_type=pulsar.ConsumerType.Shared, initial_position=EARLIEST)
    by_entry = client.subscribe(TOPIC, "by-entry", crypto_key_reader=keys, initial_position=EARLIEST)
    send_batch(batching(client, keys, 4), [b"m0", b"m1", b"m2", b"m3"])
    encrypted_producer(client, keys, batching_enabled=False).send(b"m4")
    assert backlog(server, "by-index", 5) == 5

    received = receive_all(by_index, 5)
    by_index.acknowledge(received[0])
    by_index.acknowledge(received[2])
    assert backlog(server, "by-index", 3) == 3
    by_index.close()  # what it held goes back: exactly the messages it did not acknowledge
    again = client.subscribe(TOPIC, "by-index", crypto_key_reader=keys, batch_index_ack_enabled=True,
                             consumer_type=pulsar.ConsumerType.Shared)
    rest_of_them = receive_all(again, 3)
    assert [m.data() for m in rest_of_them] == [b"m1", b"m3", b"m4"]
    assert_nothing_more(again)
    for message in rest_of_them:
        again.acknowledge(message)
    assert backlog(server, "by-index", 0) == 0

    # without batch index acks the client acknowledges the entry once all of its messages are
    received = receive_all(by_entry, 5)
    for message in received[:3]:
        by_entry.acknowledge(message)
    assert backlog(server, "by-entry", 5) == 5
    by_entry.acknowledge(received[3])
    assert backlog(server, "by-entry", 1) == 1
    by_entry.acknowledge(received[4])
    assert backlog(server, "by-entry", 0) == 0


def test_a_cumulative_ack_covers_whole_entries(server, key_files):
    keys = key_files["rsa-2048"]
    client = server.client()
    consumer = client.subscribe(TOPIC, "s", crypto_key_reader=keys, initial_position=EARLIEST)
    producer = batching(client, keys, 3)
    send_batch(producer, [b"a0", b"a1", b"a2"])
    send_batch(producer, [b"b0", b"b1", b"b2"])
    received = receive_all(consumer, 6)
    consumer.acknowledge_cumulative(received[2])
    assert backlog(server, "s", 3) == 3
    consumer.acknowledge_cumulative(received[4])  # inside the second entry: the client acks the first only
    assert backlog(server, "s", 3) == 3
    consumer.acknowledge_cumulative(received[5])
    assert backlog(server, "s", 0) == 0


def test_a_negative_ack_redelivers_the_entry(server, key_files):
    keys = key_files["rsa-2048"]
    client = server.client()
    consumer = client.subscribe(TOPIC, "s", crypto_key_reader=keys, consumer_type=pulsar.ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=100, initial_position=EARLIEST)
    send_batch(batching(client, keys, 3), [b"n0", b"n1", b"n2"])
    first = receive_all(consumer, 3)
    consumer.acknowledge(first[0])
    consumer.negative_acknowledge(first[1])
    consumer.acknowledge(first[2])
    again = consumer.receive(10_000)  # the client nacks the entry: it comes back whole
    assert (again.data(), again.redelivery_count()) == (b"n0", 1)
    for message in [again, *receive_all(consumer, 2)]:
        consumer.acknowledge(message)
    assert backlog(server, "s", 0) == 0


def test_key_shared_routes_an_entry_by_its_key(server, key_files):
    keys = key_files["rsa-2048"]
    client = server.client()
    consumers = [client.subscribe(TOPIC, "ks", crypto_key_reader=keys, consumer_type=pulsar.ConsumerType.KeyShared,
                                  consumer_name=f"c{i}", initial_position=EARLIEST) for i in range(2)]
    producer = batching(client, keys, 5, batching_type=pulsar.BatchingType.KeyBased)
    expected = {f"key-{k}": [f"{k}-{i}".encode() for i in range(5)] for k in range(8)}
    for key, values in expected.items():
        send_batch(producer, values, partition_key=key)
    got: dict[str, list[bytes]] = {}
    owner: dict[str, int] = {}
    deadline = time.monotonic() + 20
    while sum(map(len, got.values())) < 40 and time.monotonic() < deadline:
        for index, consumer in enumerate(consumers):
            try:
                message = consumer.receive(100)
            except pulsar.Timeout:
                continue
            consumer.acknowledge(message)
            got.setdefault(message.partition_key(), []).append(message.data())
            assert owner.setdefault(message.partition_key(), index) == index
    assert got == expected


def test_a_restart_keeps_encrypted_entries_and_their_fields(tmp_path, key_files):
    keys = key_files["rsa-4096"]
    data = tmp_path / "data"
    server = start_server(data)
    client = server.client()
    client.subscribe(TOPIC, "s", crypto_key_reader=keys, initial_position=EARLIEST).close()
    send_batch(batching(client, keys, 3, compression_type=pulsar.CompressionType.ZLib), [b"r0", b"r1", b"r2"])
    encrypted_producer(client, keys, batching_enabled=False).send(b"r3")
    assert server.stop() == 0

    stored = read_all(data, "public/default/secret")  # in-process: the payload, then the batch's null records
    assert [m.offset for m in stored] == [0, 1, 2, 3]
    assert [m.value is None for m in stored] == [False, True, True, False]
    assert all("pulsar.encryption" in m.batch_attributes for m in stored)
    assert b"r0" not in stored[0].value

    server = start_server(data)
    try:
        consumer = server.client().subscribe(TOPIC, "s", crypto_key_reader=keys)
        assert [m.data() for m in receive_all(consumer, 4)] == [b"r0", b"r1", b"r2", b"r3"]
        assert backlog(server, "s", 4) == 4
    finally:
        assert server.stop() == 0


def test_a_consumer_with_fewer_permits_than_a_batch_receives_each_message_once(server, key_files):
    """A receiver queue smaller than a batch: an encrypted entry is given whole, never cut to the permits
    (which may go below zero, as on Pulsar's broker), so each message arrives once."""
    keys = key_files["rsa-2048"]
    client = server.client()
    decrypting = client.subscribe(TOPIC, "small", crypto_key_reader=keys, receiver_queue_size=2,
                                  initial_position=EARLIEST)
    raw = client.subscribe(TOPIC, "raw", crypto_failure_action=CONSUME, initial_position=EARLIEST)
    producer = batching(client, keys, 5)
    for round_ in range(3):
        send_batch(producer, [f"{round_}-{i}".encode() for i in range(5)])
    values = [m.data() for m in receive_all(decrypting, 15)]
    assert values == [f"{r}-{i}".encode() for r in range(3) for i in range(5)]
    assert [raw.receive(10_000).encryption_context().batch_size() for _ in range(3)] == [5, 5, 5]
    assert_nothing_more(raw)
    assert_nothing_more(decrypting)


def test_a_consumer_without_the_key_and_few_permits_gets_the_first_entry_once(server, key_files):
    """Fewer permits than the first encrypted entry holds: the entry goes out whole once, not cut in two
    that a consumer unable to decrypt would take for two messages."""
    keys = key_files["rsa-2048"]
    client = server.client()
    raw = client.subscribe(TOPIC, "raw", crypto_failure_action=CONSUME, receiver_queue_size=2,
                           initial_position=EARLIEST)
    send_batch(batching(client, keys, 5), [f"m-{i}".encode() for i in range(5)])
    assert raw.receive(10_000).encryption_context().batch_size() == 5
    assert_nothing_more(raw)


def test_a_producer_sending_an_encrypted_batch_over_the_limit_is_refused_that_message(tmp_path, key_files):
    server = start_server(tmp_path / "data", "--max-messages-per-batch", "3")
    try:
        client = server.client()
        producer = batching(client, key_files["rsa-2048"], 4)
        results = []
        for value in (b"1", b"2", b"3", b"4"):
            producer.send_async(value, lambda result, _id: results.append(result))
        deadline = time.monotonic() + 10
        while len(results) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        # (SEND_ERROR ChecksumError: what the server answers for a SEND it cannot take)
        assert results == [pulsar.Result.ChecksumError] * 4
        assert read_all(tmp_path / "data", "public/default/secret") == []
    finally:
        server.stop()


def test_an_encrypted_entry_replicates_whole_to_another_cluster(tmp_path, key_files):
    """As a chunk: an entry of its own, with its payload and fields as stored, never cut or packed."""
    keys = key_files["rsa-2048"]
    clusters = start_clusters(tmp_path, "east", "west")
    try:
        replicate_namespace(clusters, "public/default", ["east", "west"], on=["east", "west"])
        client = clusters["east"].client()
        send_batch(batching(client, keys, 3, compression_type=pulsar.CompressionType.LZ4), [b"g0", b"g1", b"g2"])
        encrypted_producer(client, keys, batching_enabled=False).send(b"g3")
        west = clusters["west"].client()
        consumer = west.subscribe(TOPIC, "s", crypto_key_reader=keys, initial_position=EARLIEST)
        assert [m.data() for m in receive_all(consumer, 4, timeout_ms=30_000)] == [b"g0", b"g1", b"g2", b"g3"]
        raw = west.subscribe(TOPIC, "raw", crypto_failure_action=CONSUME, initial_position=EARLIEST)
        assert [raw.receive(10_000).encryption_context().batch_size() for _ in range(2)] == [3, -1]
        assert_nothing_more(raw)
    finally:
        stop_clusters(clusters)


def test_an_encrypted_message_sent_in_chunks_is_reassembled_and_decrypted(tmp_path, key_files):
    """Each chunk is encrypted on its own by the client: stored and sent back as a chunk and as an encrypted
    entry, with both sets of fields."""
    keys = key_files["rsa-2048"]
    server = start_server(tmp_path / "data", "--max-message-size", "65536")
    try:
        client = server.client()
        consumer = client.subscribe(TOPIC, "s", crypto_key_reader=keys, initial_position=EARLIEST)
        value = random.Random(28).randbytes(200_000)  # (incompressible) four chunks of at most 64 KiB
        encrypted_producer(client, keys, batching_enabled=False, chunking_enabled=True,
                           compression_type=pulsar.CompressionType.LZ4).send(value)
        message = consumer.receive(10_000)
        assert message.data() == value
        consumer.acknowledge(message)
        assert backlog(server, "s", 0) == 0
    finally:
        assert server.stop() == 0
    stored = read_all(tmp_path / "data", "public/default/secret")
    assert len(stored) > 1 and all({"pulsar.chunk", "pulsar.encryption"} <= set(m.batch_attributes) for m in stored)
