"""Pulsar's wire format where every message pays for it: a stored message's metadata (the MessageMetadata it
goes with as an entry of its own, or its SingleMessageMetadata as an item of a batch entry), a SEND's
command, and the payload frame around a command, metadata and payload (pulsar_api.proto, frames.py).

A server sends every message it delivers with metadata in a frame, and a replicator every message it
replicates. Building protobuf's message object and serializing it took 1.8 µs for a message's metadata
without key or properties (measured), more with them, and 1.6 µs for a SEND's command; framing them took
1.5 µs more. This writes the same bytes as protobuf's SerializeToString for the same fields (each present
field once, in field-number order, as protobuf writes them), and the same frame as frames.py describes, in
a fraction of that. What the fields are (which stored attributes name the producer, sequence ids, chunks) is
decided by the callers, seglog.server.protocol.metadata and frames; only the encoding is here."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.stdint cimport INT64_MIN, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcmp, memcpy

from seglog._core._format cimport (FLAG_EVENT_TIME_IS_TIMESTAMP, BatchLayout, located_batch, read_i32, read_i64,
                                   value_size)

from binascii import b2a_base64


cdef extern from "native.h" nogil:
    uint32_t seglog_crc32c(uint32_t crc, const void *data, size_t length)

cdef enum:  # wire types
    VARINT = 0
    LENGTH_DELIMITED = 2

cdef enum:  # MessageMetadata's fields
    PRODUCER_NAME = 1
    SEQUENCE_ID = 2
    PUBLISH_TIME = 3
    PROPERTIES = 4
    REPLICATED_FROM = 5
    PARTITION_KEY = 6
    REPLICATE_TO = 7
    COMPRESSION = 8
    UNCOMPRESSED_SIZE = 9
    EVENT_TIME = 12
    PARTITION_KEY_B64_ENCODED = 17
    ORDERING_KEY = 18
    NULL_VALUE = 25
    UUID = 26
    NUM_CHUNKS_FROM_MSG = 27
    TOTAL_CHUNK_MSG_SIZE = 28
    CHUNK_ID = 29

cdef enum:
    NUM_MESSAGES_IN_BATCH = 11  # MessageMetadata's, of a batch entry

cdef enum:  # SingleMessageMetadata's fields
    SINGLE_PROPERTIES = 1
    SINGLE_PARTITION_KEY = 2
    SINGLE_PAYLOAD_SIZE = 3
    SINGLE_EVENT_TIME = 5
    SINGLE_PARTITION_KEY_B64_ENCODED = 6
    SINGLE_ORDERING_KEY = 7
    SINGLE_SEQUENCE_ID = 8
    SINGLE_NULL_VALUE = 9

cdef enum:  # KeyValue's fields
    KEY = 1
    VALUE = 2

cdef enum:  # BaseCommand's fields and the type of a SEND, and CommandSend's fields
    COMMAND_TYPE = 1
    COMMAND_SEND = 6
    TYPE_SEND = 6
    SEND_PRODUCER_ID = 1
    SEND_SEQUENCE_ID = 2
    SEND_NUM_MESSAGES = 3

cdef enum:
    MAGIC_CRC32C = 0x0E01  # frames.py's: the checksum block of a payload frame


cdef struct Out:
    uint8_t *data
    Py_ssize_t size
    Py_ssize_t capacity


cdef inline int reserve(Out *out, Py_ssize_t more) except -1:
    if out.size + more <= out.capacity:
        return 0
    return grow(out, more)


cdef int grow(Out *out, Py_ssize_t more) except -1:
    """reserve's way when the buffer is full: twice as large, at least `more` bytes more."""
    cdef Py_ssize_t capacity
    cdef uint8_t *data
    capacity = max(2 * out.capacity, out.size + more, 256)
    data = <uint8_t *>realloc(out.data, capacity)
    if data == NULL:
        raise MemoryError()
    out.data = data
    out.capacity = capacity
    return 0


cdef inline int varint_size(uint64_t value) noexcept:
    cdef int size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


cdef inline int varint(Out *out, uint64_t value) except -1:
    reserve(out, 10)
    while value >= 0x80:
        out.data[out.size] = <uint8_t>(value | 0x80)
        out.size += 1
        value >>= 7
    out.data[out.size] = <uint8_t>value
    out.size += 1
    return 0


cdef inline int tag(Out *out, int field, int wire_type) except -1:
    return varint(out, (<uint64_t>field << 3) | wire_type)


cdef inline int number(Out *out, int field, uint64_t value) except -1:
    tag(out, field, VARINT)
    return varint(out, value)


cdef int unsigned64(Out *out, int field, int64_t value) except -1:
    """A uint64 field of a stored int64 (a time): a negative one is refused, as protobuf refuses it."""
    if value < 0:
        raise OverflowError(f"field {field}: {value} is not a uint64")
    return number(out, field, <uint64_t>value)


cdef int signed32(Out *out, int field, int64_t value) except -1:
    """An int32 field: a negative value goes as its 64-bit two's complement, ten bytes, as protobuf does."""
    if not -2**31 <= value < 2**31:
        raise OverflowError(f"field {field}: {value} is not an int32")
    return number(out, field, <uint64_t>value)


cdef int delimited(Out *out, int field, const char *data, Py_ssize_t length) except -1:
    tag(out, field, LENGTH_DELIMITED)
    varint(out, length)
    reserve(out, length)
    memcpy(out.data + out.size, data, length)
    out.size += length
    return 0


cdef int text(Out *out, int field, str value) except -1:
    cdef Py_ssize_t length
    cdef const char *data = PyUnicode_AsUTF8AndSize(value, &length)
    return delimited(out, field, data, length)


cdef int binary(Out *out, int field, bytes value) except -1:
    return delimited(out, field, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value))


cdef int key_value(Out *out, int field, const char *key, Py_ssize_t key_length, const char *value,
                   Py_ssize_t value_length) except -1:
    """One KeyValue message as field `field`."""
    tag(out, field, LENGTH_DELIMITED)
    varint(out, 2 + varint_size(key_length) + key_length + varint_size(value_length) + value_length)
    delimited(out, KEY, key, key_length)
    return delimited(out, VALUE, value, value_length)


cdef int partition_key(Out *out, int field, const char *key, Py_ssize_t length) except -1:
    """The key as Pulsar's partition key, a string: 1 when it is not UTF-8 and so went base64-encoded (the
    caller writes the flag that says so, a field further on)."""
    cdef Py_ssize_t i
    for i in range(length):
        if <uint8_t>key[i] >= 0x80:
            break
    else:  # ASCII, so UTF-8: the common case, without making a Python object
        return delimited(out, field, key, length)
    raw = PyBytes_FromStringAndSize(key, length)
    try:
        raw.decode()
    except UnicodeDecodeError:
        binary(out, field, b2a_base64(raw, newline=False))
        return 1
    delimited(out, field, key, length)
    return 0


# reading a stored batch's columns (docs/FORMAT.md): little-endian, each binary column int32 offsets + data

cdef inline void item(const uint8_t *batch, Py_ssize_t offsets_at, Py_ssize_t data_at, Py_ssize_t i,
                      const char **data, Py_ssize_t *size) noexcept nogil:
    """Where item i of a binary column is, and its size."""
    cdef int32_t start = read_i32(batch + offsets_at + 4 * i)
    data[0] = <const char *>batch + data_at + start
    size[0] = read_i32(batch + offsets_at + 4 * i + 4) - start


cdef inline bint present(const uint8_t *batch, Py_ssize_t validity_at, Py_ssize_t i) noexcept nogil:
    """Whether item i of a column is present (not null): always, without a validity bitmap (-1)."""
    return validity_at < 0 or (batch[validity_at + (i >> 3)] & (1 << (i & 7))) != 0


# One message's own fields, wherever they are read from: a Message object's attributes, or the columns of the
# stored batch it is record `row` of (pointers into the mapped segment). Both metadata encoders below take
# it, so the two sources are encoded by the same code.
cdef struct Record:
    const char *value
    Py_ssize_t value_size
    bint null_value
    const char *key              # NULL: no key
    Py_ssize_t key_size
    const char *ordering_key     # NULL: none
    Py_ssize_t ordering_key_size
    int64_t timestamp
    bint has_event_time
    int64_t event_time
    PyObject *properties         # a Message's properties (a dict), or NULL: the stored record's
    const uint8_t *batch
    const BatchLayout *layout
    Py_ssize_t row


cdef int properties(Out *out, int field, const Record *r) except -1:
    """Each property a KeyValue message, in the order stored (a dict's order for a Message)."""
    cdef Py_ssize_t key_length, value_length, j, stop
    cdef const char *key_data
    cdef const char *value_data
    cdef const BatchLayout *L = r.layout
    if r.properties != NULL:
        for key, value in (<dict>r.properties).items():
            key_data = PyUnicode_AsUTF8AndSize(key, &key_length)
            value_data = PyUnicode_AsUTF8AndSize(value, &value_length)
            key_value(out, field, key_data, key_length, value_data, value_length)
        return 0
    if L == NULL or L.property_entries < 0:
        return 0
    j = read_i32(r.batch + L.property_entries + 4 * r.row)
    stop = read_i32(r.batch + L.property_entries + 4 * r.row + 4)
    while j < stop:
        item(r.batch, L.property_key_offsets, L.property_key_data, j, &key_data, &key_length)
        item(r.batch, L.property_value_offsets, L.property_value_data, j, &value_data, &value_length)
        key_value(out, field, key_data, key_length, value_data, value_length)
        j += 1
    return 0


cdef bint has_properties(const Record *r):
    if r.properties != NULL:
        return len(<dict>r.properties) > 0
    return r.layout != NULL and r.layout.property_entries >= 0 and \
        read_i32(r.batch + r.layout.property_entries + 4 * r.row + 4) > read_i32(r.batch + r.layout.property_entries + 4 * r.row)


cdef int message_record(message, dict message_properties, Record *r) except -1:
    """`r` for a Message, with its `message_properties` (what r points to stays owned by the message and
    the dict, which the caller holds)."""
    value, key, ordering_key = message.value, message.key, message.ordering_key
    event_time = message.event_time
    r.null_value = value is None
    r.value = NULL if value is None else PyBytes_AS_STRING(value)
    r.value_size = 0 if value is None else PyBytes_GET_SIZE(value)
    r.key = NULL if key is None else PyBytes_AS_STRING(key)
    r.key_size = 0 if key is None else PyBytes_GET_SIZE(key)
    r.ordering_key = NULL if ordering_key is None else PyBytes_AS_STRING(ordering_key)
    r.ordering_key_size = 0 if ordering_key is None else PyBytes_GET_SIZE(ordering_key)
    r.timestamp = message.timestamp
    r.has_event_time = event_time is not None
    r.event_time = 0 if event_time is None else event_time
    r.properties = <PyObject *>message_properties
    r.batch = NULL
    r.layout = NULL
    r.row = 0
    return 0


cdef void stored_record(const uint8_t *batch, const BatchLayout *L, Py_ssize_t i, Record *r) noexcept nogil:
    """`r` for record i of the stored batch at `batch` (as _messages.messages_from_batch reads it)."""
    r.null_value = not present(batch, L.value_validity, i)
    item(batch, L.value_offsets, L.value_data, i, &r.value, &r.value_size)
    r.key = NULL
    r.key_size = 0
    if L.key_offsets >= 0 and present(batch, L.key_validity, i):
        item(batch, L.key_offsets, L.key_data, i, &r.key, &r.key_size)
    r.ordering_key = NULL
    r.ordering_key_size = 0
    if L.ordering_key_offsets >= 0 and present(batch, L.ordering_key_validity, i):
        item(batch, L.ordering_key_offsets, L.ordering_key_data, i, &r.ordering_key, &r.ordering_key_size)
    r.timestamp = read_i64(batch + L.timestamps + 8 * i)
    if L.event_times >= 0:
        r.event_time = read_i64(batch + L.event_times + 8 * i)
        r.has_event_time = r.event_time != INT64_MIN
    else:
        r.event_time = r.timestamp
        r.has_event_time = (L.flags & FLAG_EVENT_TIME_IS_TIMESTAMP) != 0
    r.properties = NULL
    r.batch = batch
    r.layout = L
    r.row = i


# What an entry's metadata carries besides its messages' fields: its producer, sequence id, the cluster it was
# replicated from (NULL: none) and where it is replicated to, a chunk's fields, and how many messages a batch
# entry holds (0: an entry of one message, sent unbatched).
cdef struct EntryFields:
    const char *producer_name
    Py_ssize_t producer_name_size
    uint64_t sequence_id
    const char *replicated_from
    Py_ssize_t replicated_from_size
    int64_t num_messages_in_batch


cdef int write_metadata(Out *out, const Record *r, const EntryFields *e, replicate_to, chunk) except -1:
    """The MessageMetadata of an entry: of one message (`r`, its fields the entry's) or, with
    e.num_messages_in_batch, of a batch whose first message is `r` (publish time the entry's, the other
    fields in each message's SingleMessageMetadata)."""
    cdef bint b64 = False
    cdef bint whole = e.num_messages_in_batch == 0
    delimited(out, PRODUCER_NAME, e.producer_name, e.producer_name_size)
    number(out, SEQUENCE_ID, e.sequence_id)
    unsigned64(out, PUBLISH_TIME, r.timestamp)
    if whole and has_properties(r):
        properties(out, PROPERTIES, r)
    if e.replicated_from != NULL:
        delimited(out, REPLICATED_FROM, e.replicated_from, e.replicated_from_size)
    if whole and r.key != NULL:
        b64 = partition_key(out, PARTITION_KEY, r.key, r.key_size)
    for cluster in replicate_to:
        text(out, REPLICATE_TO, cluster)
    if chunk is not None:
        uuid, chunk_id, chunks, total_size, compression, uncompressed_size = chunk
        number(out, COMPRESSION, <uint64_t>(<int64_t>compression))
        number(out, UNCOMPRESSED_SIZE, <uint64_t>(<unsigned int>uncompressed_size))
    if not whole:
        signed32(out, NUM_MESSAGES_IN_BATCH, e.num_messages_in_batch)
        return 0
    if r.has_event_time:
        unsigned64(out, EVENT_TIME, r.event_time)
    if b64:
        number(out, PARTITION_KEY_B64_ENCODED, 1)
    if r.ordering_key != NULL:
        delimited(out, ORDERING_KEY, r.ordering_key, r.ordering_key_size)
    if r.null_value:
        number(out, NULL_VALUE, 1)
    if chunk is not None:
        text(out, UUID, uuid)
        signed32(out, NUM_CHUNKS_FROM_MSG, chunks)
        signed32(out, TOTAL_CHUNK_MSG_SIZE, total_size)
        signed32(out, CHUNK_ID, chunk_id)
    return 0


cdef int write_single(Out *out, const Record *r, uint64_t sequence_id) except -1:
    """The SingleMessageMetadata of `r` as an item of a batch entry, with its `sequence_id`."""
    cdef bint b64 = False
    if has_properties(r):
        properties(out, SINGLE_PROPERTIES, r)
    if r.key != NULL:
        b64 = partition_key(out, SINGLE_PARTITION_KEY, r.key, r.key_size)
    number(out, SINGLE_PAYLOAD_SIZE, 0 if r.null_value else r.value_size)
    if r.has_event_time:
        unsigned64(out, SINGLE_EVENT_TIME, r.event_time)
    if b64:
        number(out, SINGLE_PARTITION_KEY_B64_ENCODED, 1)
    if r.ordering_key != NULL:
        delimited(out, SINGLE_ORDERING_KEY, r.ordering_key, r.ordering_key_size)
    number(out, SINGLE_SEQUENCE_ID, sequence_id)
    if r.null_value:
        number(out, SINGLE_NULL_VALUE, 1)
    return 0


cdef inline bytes taken(Out *out):
    return PyBytes_FromStringAndSize(<const char *>out.data, out.size)


def message_metadata(message, str producer_name, uint64_t sequence_id, str replicated_from=None,
                     replicate_to=(), chunk=None) -> bytes:
    """The MessageMetadata of `message` (a seglog Message) sent as an entry of its own: the message's
    publish time (its timestamp), properties, key, event time, ordering key and null value, with the entry's
    `producer_name`, `sequence_id`, `replicated_from` (None: none), `replicate_to` (cluster names) and
    `chunk`: None, or (uuid, chunk_id, num_chunks_from_msg, total_chunk_msg_size, compression,
    uncompressed_size) of a chunk of a large message."""
    cdef Out out = Out(NULL, 0, 0)
    cdef Record r
    cdef EntryFields e
    cdef dict message_properties = message.properties
    message_record(message, message_properties, &r)
    entry_fields(&e, producer_name, sequence_id, replicated_from, 0)
    try:
        write_metadata(&out, &r, &e, replicate_to, chunk)
        return taken(&out)
    finally:
        free(out.data)


def single_message_metadata(message, uint64_t sequence_id) -> bytes:
    """The SingleMessageMetadata of `message` (a seglog Message) as an item of a batch entry: its payload
    size, properties, key, event time, ordering key and null value, and its `sequence_id`."""
    cdef Out out = Out(NULL, 0, 0)
    cdef Record r
    cdef dict message_properties = message.properties
    message_record(message, message_properties, &r)
    try:
        write_single(&out, &r, sequence_id)
        return taken(&out)
    finally:
        free(out.data)


cdef int entry_fields(EntryFields *e, str producer_name, uint64_t sequence_id, str replicated_from,
                      int64_t num_messages_in_batch) except -1:
    e.producer_name = PyUnicode_AsUTF8AndSize(producer_name, &e.producer_name_size)
    e.sequence_id = sequence_id
    e.replicated_from = NULL
    e.replicated_from_size = 0
    if replicated_from is not None:
        e.replicated_from = PyUnicode_AsUTF8AndSize(replicated_from, &e.replicated_from_size)
    e.num_messages_in_batch = num_messages_in_batch
    return 0


def send_command(uint64_t producer_id, uint64_t sequence_id, int64_t num_messages) -> bytes:
    """The BaseCommand of a SEND (type SEND, and its CommandSend's `producer_id`, `sequence_id` and
    `num_messages`), encoded."""
    cdef Out send = Out(NULL, 0, 0)
    cdef Out out = Out(NULL, 0, 0)
    try:
        number(&send, SEND_PRODUCER_ID, producer_id)
        number(&send, SEND_SEQUENCE_ID, sequence_id)
        signed32(&send, SEND_NUM_MESSAGES, num_messages)
        number(&out, COMMAND_TYPE, TYPE_SEND)
        delimited(&out, COMMAND_SEND, <const char *>send.data, send.size)
        return taken(&out)
    finally:
        free(send.data)
        free(out.data)


cdef inline void big_endian32(uint8_t *p, uint32_t value) noexcept nogil:
    p[0] = <uint8_t>(value >> 24)
    p[1] = <uint8_t>(value >> 16)
    p[2] = <uint8_t>(value >> 8)
    p[3] = <uint8_t>value


def payload_frame(bytes command, bytes metadata, bytes payload) -> bytes:
    """The payload frame of an encoded BaseCommand, MessageMetadata and payload, with the CRC32C block as
    clients at protocol version 6 and above write it: [u32 total][u32 command size][command][u16 0x0e01]
    [u32 CRC32C of what follows][u32 metadata size][metadata][payload] (frames.py)."""
    cdef Py_ssize_t command_size = PyBytes_GET_SIZE(command), metadata_size = PyBytes_GET_SIZE(metadata)
    cdef Py_ssize_t payload_size = PyBytes_GET_SIZE(payload)
    cdef Py_ssize_t total = 4 + command_size + 2 + 4 + 4 + metadata_size + payload_size
    if total > 0xFFFFFFFF:
        raise OverflowError(f"a frame of {total} bytes is beyond the protocol's 4 GiB")
    frame = PyBytes_FromStringAndSize(NULL, 4 + total)
    cdef uint8_t *p = <uint8_t *>PyBytes_AS_STRING(frame)
    cdef uint8_t *checked
    big_endian32(p, <uint32_t>total)
    big_endian32(p + 4, <uint32_t>command_size)
    memcpy(p + 8, PyBytes_AS_STRING(command), command_size)
    p += 8 + command_size
    p[0] = <uint8_t>(MAGIC_CRC32C >> 8)
    p[1] = <uint8_t>(MAGIC_CRC32C & 0xFF)
    checked = p + 6
    big_endian32(checked, <uint32_t>metadata_size)
    memcpy(checked + 4, PyBytes_AS_STRING(metadata), metadata_size)
    memcpy(checked + 4 + metadata_size, PyBytes_AS_STRING(payload), payload_size)
    big_endian32(p + 2, seglog_crc32c(0, checked, 4 + metadata_size + payload_size))
    return frame


# reading: runs of SEND_RECEIPT frames, what a producer with many messages in flight reads most

cdef enum:  # BaseCommand's field and type of a SEND_RECEIPT, and CommandSendReceipt's fields
    COMMAND_SEND_RECEIPT = 7
    TYPE_SEND_RECEIPT = 7
    RECEIPT_PRODUCER_ID = 1
    RECEIPT_SEQUENCE_ID = 2


cdef inline Py_ssize_t read_varint(const uint8_t *data, Py_ssize_t position, Py_ssize_t end,
                                   uint64_t *value) noexcept nogil:
    """The position after the varint at `position` (its value in `value`), or -1 if it runs past `end` or
    beyond 10 bytes."""
    cdef uint64_t result = 0
    cdef int shift = 0
    while position < end and shift < 70:
        result |= <uint64_t>(data[position] & 0x7F) << shift
        position += 1
        if not data[position - 1] & 0x80:
            value[0] = result
            return position
        shift += 7
    return -1


cdef Py_ssize_t delimited_end(const uint8_t *data, Py_ssize_t *position, Py_ssize_t end) noexcept nogil:
    """The end of the length-delimited value whose length is at `position[0]` (moved to the value's start), or
    -1 if the length is malformed or the value runs past `end`."""
    cdef uint64_t length
    position[0] = read_varint(data, position[0], end, &length)
    if position[0] < 0 or length > <uint64_t>(end - position[0]):
        return -1
    return position[0] + <Py_ssize_t>length


cdef Py_ssize_t skip_field(const uint8_t *data, Py_ssize_t position, Py_ssize_t end, int wire_type) noexcept nogil:
    """The position after a field's value of `wire_type` at `position`, or -1 if it is malformed."""
    cdef uint64_t length
    if wire_type == VARINT:
        return read_varint(data, position, end, &length)
    if wire_type == LENGTH_DELIMITED:
        return delimited_end(data, &position, end)
    if wire_type == 1:  # 64-bit
        return position + 8 if end - position >= 8 else -1
    if wire_type == 5:  # 32-bit
        return position + 4 if end - position >= 4 else -1
    return -1


cdef bint parse_receipt(const uint8_t *data, Py_ssize_t position, Py_ssize_t end, uint64_t *producer_id,
                        uint64_t *sequence_id) noexcept nogil:
    """Whether data[position:end] is a BaseCommand of type SEND_RECEIPT whose CommandSendReceipt has its
    producer id and sequence id (then in the two out arguments)."""
    cdef uint64_t key, value
    cdef Py_ssize_t inner_end
    cdef bint is_receipt = False, has_producer = False, has_sequence = False
    while position < end:
        position = read_varint(data, position, end, &key)
        if position < 0:
            return False
        if key == (COMMAND_TYPE << 3 | VARINT):
            position = read_varint(data, position, end, &value)
            if position < 0 or value != TYPE_SEND_RECEIPT:
                return False
            is_receipt = True
        elif key == (COMMAND_SEND_RECEIPT << 3 | LENGTH_DELIMITED):
            inner_end = delimited_end(data, &position, end)
            if inner_end < 0:
                return False
            while position < inner_end:
                position = read_varint(data, position, inner_end, &key)
                if position < 0:
                    return False
                if key == (RECEIPT_PRODUCER_ID << 3 | VARINT):
                    position = read_varint(data, position, inner_end, producer_id)
                    has_producer = True
                elif key == (RECEIPT_SEQUENCE_ID << 3 | VARINT):
                    position = read_varint(data, position, inner_end, sequence_id)
                    has_sequence = True
                else:
                    position = skip_field(data, position, inner_end, key & 7)
                if position < 0:
                    return False
        else:
            position = skip_field(data, position, end, key & 7)
            if position < 0:
                return False
    return is_receipt and has_producer and has_sequence


cdef Py_ssize_t simple_command_size(const uint8_t *data, Py_ssize_t position, Py_ssize_t end) noexcept nogil:
    """The command size of the frame at `position` when it is a simple command (no payload) all here before
    `end`, else -1 (a payload command, or a frame not all here yet)."""
    cdef Py_ssize_t total, command_size
    if end - position < 8:
        return -1
    total = (<Py_ssize_t>data[position] << 24 | <Py_ssize_t>data[position + 1] << 16
             | <Py_ssize_t>data[position + 2] << 8 | <Py_ssize_t>data[position + 3])
    command_size = (<Py_ssize_t>data[position + 4] << 24 | <Py_ssize_t>data[position + 5] << 16
                    | <Py_ssize_t>data[position + 6] << 8 | <Py_ssize_t>data[position + 7])
    if total != command_size + 4 or end - position - 4 < total:
        return -1
    return command_size


def send_receipts(const uint8_t[:] buffer, Py_ssize_t position):
    """The SEND_RECEIPT frames that follow one another from `position` in `buffer`, each whole and
    well-formed, as (producer_id, sequence_id) pairs in order, and the position after the last: ([],
    position) if the frame there is anything else (another command, cut short, malformed), which is then
    frames.py's to decode. The same fields protobuf's parser reads (any other field skipped)."""
    cdef Py_ssize_t end = buffer.shape[0], command_size
    cdef uint64_t producer_id = 0, sequence_id = 0
    cdef const uint8_t *data = &buffer[0] if end > 0 else NULL
    receipts = []
    while end - position >= 8:
        command_size = simple_command_size(data, position, end)
        if command_size < 0:
            break
        if not parse_receipt(data, position + 8, position + 8 + command_size, &producer_id, &sequence_id):
            break
        receipts.append((producer_id, sequence_id))
        position += 8 + command_size
    return receipts, position


# reading: a consumer's FLOW and ACK frames, what a server reads all along beside what it sends

cdef enum:  # BaseCommand's fields and types of ACK and FLOW, their fields, and MessageIdData's
    COMMAND_ACK = 10
    COMMAND_FLOW = 11
    TYPE_ACK = 10
    TYPE_FLOW = 11
    FLOW_CONSUMER_ID = 1
    FLOW_MESSAGE_PERMITS = 2
    ACK_CONSUMER_ID = 1
    ACK_TYPE = 2
    ACK_MESSAGE_ID = 3
    ACK_REQUEST_ID = 8
    ACKED_LEDGER_ID = 1
    ACKED_ENTRY_ID = 2
    ACKED_PARTITION = 3
    ACKED_BATCH_INDEX = 4
    ACKED_ACK_SET = 5
    ACKED_BATCH_SIZE = 6


cdef class FlowCommand:
    """A FLOW read natively (consumer_commands): its CommandFlow's fields, by protobuf's names."""
    cdef readonly uint64_t consumer_id
    cdef readonly uint32_t message_permits

    def __init__(self, uint64_t consumer_id, uint32_t message_permits):
        self.consumer_id, self.message_permits = consumer_id, message_permits


cdef class AckedId:
    """A MessageIdData of an ACK read natively, its fields by protobuf's names (partition and batch_index -1
    when absent, as protobuf reads them)."""
    cdef readonly uint64_t ledger_id
    cdef readonly uint64_t entry_id
    cdef readonly int32_t partition
    cdef readonly int32_t batch_index
    cdef readonly tuple ack_set

    def __init__(self, uint64_t ledger_id, uint64_t entry_id, int32_t partition=-1, int32_t batch_index=-1,
                 tuple ack_set=()):
        self.ledger_id, self.entry_id, self.partition, self.batch_index = ledger_id, entry_id, partition, batch_index
        self.ack_set = ack_set


cdef class AckCommand:
    """An ACK read natively (consumer_commands): its CommandAck's fields, by protobuf's names, and
    `request_id` None when it has none."""
    cdef readonly uint64_t consumer_id
    cdef readonly int ack_type
    cdef readonly list message_id
    cdef readonly object request_id

    def __init__(self, uint64_t consumer_id, int ack_type, list message_id, request_id=None):
        self.consumer_id, self.ack_type, self.message_id, self.request_id = consumer_id, ack_type, message_id, request_id


cdef AckedId parse_acked_id(const uint8_t *data, Py_ssize_t position, Py_ssize_t end):
    """The MessageIdData at data[position:end] with the fields an acknowledgement uses (batch_size, which the
    server does not need, skipped), or None for anything else (a chunk's first id, a required field missing,
    malformed)."""
    cdef uint64_t key, value, ledger_id = 0, entry_id = 0
    cdef int32_t partition = -1, batch_index = -1
    cdef Py_ssize_t inner_end
    cdef bint has_ledger = False, has_entry = False
    ack_set = []
    while position < end:
        position = read_varint(data, position, end, &key)
        if position < 0:
            return None
        if key == (ACKED_ACK_SET << 3 | LENGTH_DELIMITED):  # packed
            inner_end = delimited_end(data, &position, end)
            if inner_end < 0:
                return None
            while position < inner_end:
                position = read_varint(data, position, inner_end, &value)
                if position < 0:
                    return None
                ack_set.append(<int64_t>value)
            continue
        if key & 7 != VARINT:
            return None
        position = read_varint(data, position, end, &value)
        if position < 0:
            return None
        if key >> 3 == ACKED_LEDGER_ID:
            ledger_id, has_ledger = value, True
        elif key >> 3 == ACKED_ENTRY_ID:
            entry_id, has_entry = value, True
        elif key >> 3 == ACKED_PARTITION:
            partition = <int32_t>value  # (an int32's ten-byte negative varint: its low 32 bits, as protobuf)
        elif key >> 3 == ACKED_BATCH_INDEX:
            batch_index = <int32_t>value
        elif key >> 3 == ACKED_ACK_SET:
            ack_set.append(<int64_t>value)
        elif key >> 3 != ACKED_BATCH_SIZE:
            return None
    if not (has_ledger and has_entry):
        return None
    return AckedId(ledger_id, entry_id, partition, batch_index, tuple(ack_set))


cdef object parse_consumer_command(const uint8_t *data, Py_ssize_t position, Py_ssize_t end):
    """The BaseCommand at data[position:end] as a FlowCommand or AckCommand when it is a FLOW, or an ACK with
    only consumer id, ack type, message ids and request id; None for anything else (properties, a
    validation error, a transaction, another command, a required field missing, malformed), which
    frames.py decodes."""
    cdef uint64_t key, value, kind = 0, consumer_id = 0, permits = 0, ack_type = 0, request_id = 0
    cdef Py_ssize_t inner_end, inner
    cdef bint has_kind = False, has_consumer = False, has_permits = False, has_type = False, has_request = False
    cdef int sub = 0
    cdef AckedId acked
    ids = []
    while position < end:
        position = read_varint(data, position, end, &key)
        if position < 0:
            return None
        if key == (COMMAND_TYPE << 3 | VARINT):
            position = read_varint(data, position, end, &kind)
            has_kind = True
        elif sub == 0 and (key == (COMMAND_FLOW << 3 | LENGTH_DELIMITED)
                           or key == (COMMAND_ACK << 3 | LENGTH_DELIMITED)):
            sub = key >> 3
            inner_end = delimited_end(data, &position, end)
            if inner_end < 0:
                return None
            while position < inner_end:
                position = read_varint(data, position, inner_end, &key)
                if position < 0:
                    return None
                if sub == COMMAND_ACK and key == (ACK_MESSAGE_ID << 3 | LENGTH_DELIMITED):
                    inner = delimited_end(data, &position, inner_end)
                    if inner < 0:
                        return None
                    acked = parse_acked_id(data, position, inner)
                    if acked is None:
                        return None
                    ids.append(acked)
                    position = inner
                    continue
                if key & 7 != VARINT:
                    return None
                position = read_varint(data, position, inner_end, &value)
                if position < 0:
                    return None
                if key >> 3 == (FLOW_CONSUMER_ID if sub == COMMAND_FLOW else ACK_CONSUMER_ID):
                    consumer_id, has_consumer = value, True
                elif sub == COMMAND_FLOW and key >> 3 == FLOW_MESSAGE_PERMITS:
                    permits, has_permits = value, True
                elif sub == COMMAND_ACK and key >> 3 == ACK_TYPE:
                    ack_type, has_type = value, True
                elif sub == COMMAND_ACK and key >> 3 == ACK_REQUEST_ID:
                    request_id, has_request = value, True
                else:
                    return None
        else:
            return None
        if position < 0:
            return None
    if not has_kind or kind != (TYPE_FLOW if sub == COMMAND_FLOW else TYPE_ACK) or not has_consumer:
        return None
    if sub == COMMAND_FLOW:
        return FlowCommand(consumer_id, <uint32_t>permits) if has_permits and permits <= 0xFFFFFFFF else None
    if not has_type or ack_type > 1:
        return None
    return AckCommand(consumer_id, <int>ack_type, ids, request_id if has_request else None)


def consumer_commands(const uint8_t[:] buffer, Py_ssize_t position):
    """The FLOW and ACK frames that follow one another from `position` in `buffer`, each whole and of the
    kind parse_consumer_command reads, as FlowCommand and AckCommand objects in order, and the position after
    the last: ([], position) if the frame there is anything else (another command, cut short, malformed),
    which is then frames.py's to decode. The same values protobuf's parser gives for these fields."""
    cdef Py_ssize_t end = buffer.shape[0], command_size
    cdef const uint8_t *data = &buffer[0] if end > 0 else NULL
    commands = []
    while end - position >= 8:
        command_size = simple_command_size(data, position, end)
        if command_size < 0:
            break
        parsed = parse_consumer_command(data, position + 8, position + 8 + command_size)
        if parsed is None:
            break
        commands.append(parsed)
        position += 8 + command_size
    return commands, position


# writing: MESSAGE frames of stored messages, what a server sends for every message it delivers

cdef enum:  # BaseCommand's field and type of a MESSAGE, CommandMessage's fields and MessageIdData's
    COMMAND_MESSAGE = 9
    TYPE_MESSAGE = 9
    MESSAGE_CONSUMER_ID = 1
    MESSAGE_MESSAGE_ID = 2
    MESSAGE_REDELIVERY_COUNT = 3
    ID_LEDGER_ID = 1
    ID_ENTRY_ID = 2
    ID_PARTITION = 3


cdef int message_command(Out *out, uint64_t consumer_id, uint64_t entry_id, int partition,
                         uint32_t redelivery_count) except -1:
    """A MESSAGE's BaseCommand: the consumer, the entry's id (ledger 0, `entry_id`, `partition` when >= 0)
    and its redelivery count, as protobuf serializes them."""
    cdef Py_ssize_t id_size = 2 + varint_size(0) + varint_size(entry_id)
    cdef Py_ssize_t message_size
    if partition >= 0:
        id_size += 1 + varint_size(<uint64_t>partition)
    message_size = 3 + varint_size(consumer_id) + varint_size(id_size) + id_size + varint_size(redelivery_count)
    number(out, COMMAND_TYPE, TYPE_MESSAGE)
    tag(out, COMMAND_MESSAGE, LENGTH_DELIMITED)
    varint(out, message_size)
    number(out, MESSAGE_CONSUMER_ID, consumer_id)
    tag(out, MESSAGE_MESSAGE_ID, LENGTH_DELIMITED)
    varint(out, id_size)
    number(out, ID_LEDGER_ID, 0)
    number(out, ID_ENTRY_ID, entry_id)
    if partition >= 0:
        number(out, ID_PARTITION, <uint64_t>partition)
    return number(out, MESSAGE_REDELIVERY_COUNT, redelivery_count)


cdef inline int append(Out *out, const char *data, Py_ssize_t length) except -1:
    reserve(out, length)
    memcpy(out.data + out.size, data, length)
    out.size += length
    return 0


cdef int end_frame(Out *out, Py_ssize_t start, Py_ssize_t command_size, Py_ssize_t metadata_at,
                   Py_ssize_t payload_at) except -1:
    """Fill in the sizes and checksum of the payload frame written from `start` (payload_frame's layout),
    whose metadata starts at `metadata_at`, its payload at `payload_at`, and which ends at out.size."""
    cdef Py_ssize_t total = out.size - start - 4
    if total > 0xFFFFFFFF:
        raise OverflowError(f"a frame of {total} bytes is beyond the protocol's 4 GiB")
    big_endian32(out.data + start, <uint32_t>total)
    big_endian32(out.data + start + 4, <uint32_t>command_size)
    big_endian32(out.data + metadata_at - 4, <uint32_t>(payload_at - metadata_at))
    big_endian32(out.data + metadata_at - 8,
                 seglog_crc32c(0, out.data + metadata_at - 4, out.size - metadata_at + 4))
    return 0


cdef enum:
    METADATA_SCHEMA_VERSION = 16  # MessageMetadata's, after the fields write_metadata writes
    # what a message adds to its stored bytes in a batch entry, about: item size, SingleMessageMetadata
    ENTRY_BYTES_A_MESSAGE = 32


cdef bint attribute(const uint8_t *batch, const BatchLayout *L, bytes name, const char **value,
                    Py_ssize_t *size) noexcept:
    """Whether the stored batch has the attribute `name` (UTF-8), and where its value is."""
    cdef Py_ssize_t j, key_size, length = PyBytes_GET_SIZE(name)
    cdef const char *key
    for j in range(L.attribute_count):
        item(batch, L.attribute_key_offsets, L.attribute_key_data, j, &key, &key_size)
        if key_size == length and memcmp(key, PyBytes_AS_STRING(name), length) == 0:
            item(batch, L.attribute_value_offsets, L.attribute_value_data, j, value, size)
            return True
    return False


cdef int decimal(const char *text, Py_ssize_t size, uint64_t *value, bytes name) except -1:
    """A stored attribute's unsigned decimal value (a sequence id)."""
    cdef Py_ssize_t i
    cdef uint64_t digit
    value[0] = 0
    for i in range(size):
        digit = <uint8_t>text[i] - 48
        if digit > 9 or value[0] > (0xFFFFFFFFFFFFFFFF - digit) // 10:
            break
        value[0] = value[0] * 10 + digit
    else:
        if size:
            return 0
    raise ValueError(f"attribute {name.decode()} is {PyBytes_FromStringAndSize(text, size)!r}: expected an "
                     f"unsigned 64-bit decimal")


cdef inline int hex_digit(char c) noexcept:
    if 48 <= c <= 57:
        return c - 48
    if 97 <= c <= 102:
        return c - 87
    if 65 <= c <= 70:
        return c - 55
    return -1


cdef int hex_field(Out *out, int field, const char *text, Py_ssize_t size, bytes name) except -1:
    """A bytes field from a stored attribute's hex digits (a schema version)."""
    cdef Py_ssize_t i
    cdef int high, low
    if size % 2:
        raise ValueError(f"attribute {name.decode()} has {size} hex digits: expected an even number")
    tag(out, field, LENGTH_DELIMITED)
    varint(out, size // 2)
    reserve(out, size // 2)
    for i in range(0, size, 2):
        high, low = hex_digit(text[i]), hex_digit(text[i + 1])
        if high < 0 or low < 0:
            raise ValueError(f"attribute {name.decode()} is {PyBytes_FromStringAndSize(text, size)!r}: "
                             f"expected hex digits")
        out.data[out.size] = <uint8_t>(high * 16 + low)
        out.size += 1
    return 0


cdef int stored_rows(const uint8_t *batch, const BatchLayout *L, int64_t base_offset, const int64_t *offsets,
                     Py_ssize_t n, int64_t *rows) except -1:
    """The record index of each of `offsets` (ascending) in the stored batch: offset - `base_offset`, or its
    place in the offsets column of a compacted batch, whose offsets have gaps."""
    cdef Py_ssize_t j, row = 0
    for j in range(n):
        if j and offsets[j] <= offsets[j - 1]:
            raise ValueError(f"offsets must ascend; {offsets[j]} follows {offsets[j - 1]}")
        if L.offsets < 0:
            row = offsets[j] - base_offset
        else:
            while row < L.count and read_i64(batch + L.offsets + 8 * row) < offsets[j]:
                row += 1
            if row < L.count and read_i64(batch + L.offsets + 8 * row) != offsets[j]:
                row = L.count
        if not 0 <= row < L.count:
            raise ValueError(f"offset {offsets[j]} is not one of the stored batch's {L.count} records")
        rows[j] = row
    return 0


cdef class DeliveryEncoder:
    """The MESSAGE frames of one consumer (`consumer_id`, its ids carrying `partition`, -1: none), built from
    the pieces dispatch gives it (subscriptions.delivery.Piece: `data`, `position`, `base`, `offsets`,
    `redelivery_counts`) straight from their stored batches' columns, all of a read's pieces in one call.

    A message of a stored batch of one goes as an entry of its own, id (0, its offset, -1). The messages of
    a bigger batch go as batch entries: each run at consecutive offsets with one publish time and one
    redelivery count (at most `max_entry_messages`, and `max_entry_bytes` of values but for a larger message
    alone) is one entry (num_messages_in_batch, then an item [u32 size][SingleMessageMetadata][value] a
    message), its id its first message's offset, message i of it at batch index i.

    What an entry carries of its batch is read from the batch's attributes, named by `fields`: the producer
    name, the first sequence id (a decimal; message i's is first + (offset - base); without it, the offsets
    are the sequence ids, as for a batch written in-process), the cluster it was replicated from, and the
    schema version (hex), which follows the rest of the metadata. A batch with any of the attributes
    `whole_entry` (an encrypted entry, a chunk) is the caller's to send."""
    cdef uint64_t consumer_id
    cdef int partition
    cdef Py_ssize_t max_entry_messages, max_entry_bytes
    cdef bytes producer, sequence_id, replicated_from, schema_version
    cdef tuple whole_entry

    def __init__(self, uint64_t consumer_id, int partition, Py_ssize_t max_entry_messages,
                 Py_ssize_t max_entry_bytes, fields, whole_entry):
        producer, sequence_id, replicated_from, schema_version = (name.encode() for name in fields)
        self.consumer_id = consumer_id
        self.partition = partition
        self.max_entry_messages = max_entry_messages
        self.max_entry_bytes = max_entry_bytes
        self.producer, self.sequence_id = producer, sequence_id
        self.replicated_from, self.schema_version = replicated_from, schema_version
        self.whole_entry = tuple(name.encode() for name in whole_entry)

    def frames(self, pieces, Py_ssize_t start, list entries):
        """The frames of pieces[start:] up to the first whose batch has a `whole_entry` attribute, as one
        bytes object, and that piece's index (len(pieces) if none has): (frames, index). The batch entries
        sent are appended to `entries` as (id, messages) pairs. ValueError for a piece's offsets not
        ascending within its batch, or a malformed attribute."""
        cdef Out out = Out(NULL, 0, 0)
        cdef const uint8_t[::1] view
        cdef const int64_t[::1] offsets
        cdef const int64_t[::1] counts
        cdef BatchLayout L
        cdef const uint8_t *batch
        cdef int64_t *rows = NULL
        mapped = None
        try:
            while start < len(pieces):
                piece = pieces[start]
                data = piece.data
                if data is not mapped:
                    view = data
                    mapped = data
                batch = located_batch(view, piece.position, &L)
                if self.whole(batch, &L):
                    break
                offsets = piece.offsets
                if offsets.shape[0] == 0:
                    raise ValueError("a piece without offsets: expected one message at least")
                redelivery_counts = piece.redelivery_counts
                if redelivery_counts is not None:
                    counts = redelivery_counts
                    if counts.shape[0] != offsets.shape[0]:
                        raise ValueError(f"{counts.shape[0]} redelivery counts for {offsets.shape[0]} offsets")
                rows = <int64_t *>realloc(rows, max(offsets.shape[0], 1) * sizeof(int64_t))
                if rows == NULL:
                    raise MemoryError()
                stored_rows(batch, &L, piece.base, &offsets[0], offsets.shape[0], rows)
                # (the piece's frames, about: room for them at once, not a copy at every doubling)
                reserve(&out, L.end + ENTRY_BYTES_A_MESSAGE * L.count)
                self.piece_frames(&out, batch, &L, piece.base, &offsets[0], rows, offsets.shape[0],
                                  &counts[0] if redelivery_counts is not None else NULL, entries)
                start += 1
            return taken(&out), start
        finally:
            free(rows)
            free(out.data)

    cdef bint whole(self, const uint8_t *batch, const BatchLayout *L) noexcept:
        """Whether the stored batch has one of the `whole_entry` attributes."""
        cdef const char *value
        cdef Py_ssize_t size
        cdef bytes name
        for name in self.whole_entry:
            if attribute(batch, L, name, &value, &size):
                return True
        return False

    cdef int piece_frames(self, Out *out, const uint8_t *batch, const BatchLayout *L, int64_t base_offset,
                          const int64_t *offsets, const int64_t *rows, Py_ssize_t n, const int64_t *counts,
                          list entries) except -1:
        """The entries of `n` messages of the stored batch at `batch`, at `offsets` (its records `rows`)."""
        cdef bint batched = L.count > 1
        cdef bint has_sequence_ids
        cdef uint64_t first_sequence_id = 0
        cdef const char *version = NULL
        cdef Py_ssize_t version_size = 0, i = 0, j, stop, start, command_at, metadata_at, item_at, payload
        cdef const char *value
        cdef Py_ssize_t size
        cdef Record r
        cdef EntryFields e
        cdef int64_t timestamp
        e.producer_name = b""
        e.producer_name_size = 0
        attribute(batch, L, self.producer, &e.producer_name, &e.producer_name_size)
        e.replicated_from = NULL
        e.replicated_from_size = 0
        attribute(batch, L, self.replicated_from, &e.replicated_from, &e.replicated_from_size)
        has_sequence_ids = attribute(batch, L, self.sequence_id, &value, &size)
        if has_sequence_ids:
            decimal(value, size, &first_sequence_id, self.sequence_id)
        attribute(batch, L, self.schema_version, &version, &version_size)
        while i < n:
            stop = i + 1  # this entry's messages are i .. stop - 1
            if batched:
                timestamp = read_i64(batch + L.timestamps + 8 * rows[i])
                payload = value_size(batch, L, rows[i])
                while stop < n and stop - i < self.max_entry_messages and offsets[stop] == offsets[stop - 1] + 1 \
                        and read_i64(batch + L.timestamps + 8 * rows[stop]) == timestamp \
                        and (counts == NULL or counts[stop] == counts[i]):
                    payload += value_size(batch, L, rows[stop])
                    if payload > self.max_entry_bytes:
                        break
                    stop += 1
            stored_record(batch, L, rows[i], &r)
            e.sequence_id = first_sequence_id + <uint64_t>(offsets[i] - base_offset) if has_sequence_ids \
                else <uint64_t>offsets[i]
            e.num_messages_in_batch = stop - i if batched else 0
            start = out.size
            reserve(out, 8)
            out.size += 8
            command_at = out.size
            message_command(out, self.consumer_id, <uint64_t>offsets[i], self.partition,
                            0 if counts == NULL else <uint32_t>counts[i])
            reserve(out, 10)
            out.data[out.size] = <uint8_t>(MAGIC_CRC32C >> 8)
            out.data[out.size + 1] = <uint8_t>(MAGIC_CRC32C & 0xFF)
            out.size += 10
            metadata_at = out.size
            write_metadata(out, &r, &e, (), None)
            if version != NULL:
                hex_field(out, METADATA_SCHEMA_VERSION, version, version_size, self.schema_version)
            payload = out.size
            if not batched:
                append(out, r.value, r.value_size)
            else:
                for j in range(i, stop):
                    if j > i:
                        stored_record(batch, L, rows[j], &r)
                    reserve(out, 4)
                    item_at = out.size
                    out.size += 4
                    write_single(out, &r, first_sequence_id + <uint64_t>(offsets[j] - base_offset)
                                 if has_sequence_ids else <uint64_t>offsets[j])
                    big_endian32(out.data + item_at, <uint32_t>(out.size - item_at - 4))
                    append(out, r.value, r.value_size)
                entries.append((offsets[i], stop - i))
            end_frame(out, start, metadata_at - 10 - command_at, metadata_at, payload)
            i = stop
        return 0
