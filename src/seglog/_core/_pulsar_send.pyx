"""A SEND's way in, natively: SEND frames cut from what a connection read, their MessageMetadata read, and a
batch's messages unpacked straight into the stored columns, with no Python object per message.

seglog.server.protocol (frames.py, batches.py, metadata.py) is the reference: it decodes every frame with
protobuf and unpacks a batch message by message into Python lists, 2 to 3 µs a message. This module takes the
common case only, an entry that is neither encrypted nor a chunk nor a marker nor transactional, whose fields
are well-formed, and hands back None for everything else (or anything it is unsure of), which then takes the
reference path with its exact answers and error messages. What it does take it stores byte for byte as the
reference path would (tests/server/test_native_send.py compares the two on generated SENDs).

Field numbers and types are pulsar_api.proto's (MessageMetadata, SingleMessageMetadata, KeyValue, BaseCommand,
CommandSend, CommandSendReceipt, MessageIdData); protobuf's wire format: a varint tag (field << 3 | wire type),
then a varint (type 0), 8 bytes (1), a varint length and that many bytes (2) or 4 bytes (5). A field read
twice keeps its last value and a repeated one each, as protobuf's parser does; a known field of an unexpected
wire type, which protobuf would keep as an unknown field, sends the entry down the reference path."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport INT64_MIN, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memset

cimport numpy as cnp

from seglog._core._writer cimport BatchSource, Column, batch_source, offsets_column

from seglog._core._format import LOG_APPEND_TIME as _LOG_APPEND_TIME

cnp.import_array()


cdef extern from "native.h" nogil:
    uint32_t seglog_crc32c(uint32_t crc, const void *data, size_t length)

cdef enum:
    VARINT = 0
    FIXED64 = 1
    DELIMITED = 2
    FIXED32 = 5
    MAGIC_CRC32C = 0x0E01
    MAGIC_BROKER_ENTRY_METADATA = 0x0E02
    TYPE_SEND = 6               # BaseCommand.Type SEND, and BaseCommand's field of its CommandSend
    TYPE_SEND_RECEIPT = 7
    COMPRESSION_SNAPPY = 4      # the highest CompressionType

cdef int64_t NO_EVENT_TIME = INT64_MIN  # _format.NO_EVENT_TIME: a message without one
cdef uint64_t INT64_MAX = 0x7FFFFFFFFFFFFFFF


# --- reading protobuf ---------------------------------------------------------------------------------

cdef struct Reader:
    const uint8_t *p
    const uint8_t *end
    bint bad            # cut short or malformed: the reference path decides


cdef inline uint64_t varint(Reader *r) noexcept nogil:
    cdef uint64_t value = 0
    cdef int shift = 0
    cdef uint8_t byte
    while r.p < r.end and shift < 64:
        byte = r.p[0]
        r.p += 1
        value |= <uint64_t>(byte & 0x7F) << shift
        if byte < 0x80:
            return value
        shift += 7
    r.bad = True
    return 0


cdef inline bint delimited(Reader *r, const uint8_t **data, Py_ssize_t *length) noexcept nogil:
    """A length-delimited field's bytes (False, and r.bad, if they run past the end)."""
    cdef uint64_t size = varint(r)
    if r.bad or size > <uint64_t>(r.end - r.p):
        r.bad = True
        return False
    data[0] = r.p
    length[0] = <Py_ssize_t>size
    r.p += size
    return True


cdef inline void skip(Reader *r, int wire) noexcept nogil:
    """Step over a field this module does not read, as protobuf keeps it among the unknown fields."""
    cdef const uint8_t *data
    cdef Py_ssize_t length
    if wire == VARINT:
        varint(r)
    elif wire == FIXED64 or wire == FIXED32:
        length = 8 if wire == FIXED64 else 4
        if r.end - r.p < length:
            r.bad = True
        else:
            r.p += length
    elif wire == DELIMITED:
        delimited(r, &data, &length)
    else:  # groups (3, 4) and 6, 7: nothing a Pulsar client sends
        r.bad = True


cdef inline bint valid_field(uint64_t number) noexcept nogil:
    """Whether protobuf's parser takes `number` as a field number (1 to 2**29 - 1; anything else: corrupt)."""
    return 0 < number < (1 << 29)


cdef inline bint utf8(const uint8_t *s, Py_ssize_t n) noexcept nogil:
    """Whether s[:n] is UTF-8 as Python's strict decoder takes it (no overlong forms, no surrogates, nothing
    past U+10FFFF): a string field protobuf gives Python decodes so, and the reference path stores it encoded
    back, the same bytes."""
    cdef Py_ssize_t i = 0
    cdef uint8_t c, d
    while i < n:
        c = s[i]
        if c < 0x80:
            i += 1
            continue
        if c < 0xC2 or c > 0xF4:
            return False
        if c < 0xE0:
            if i + 1 >= n or (s[i + 1] & 0xC0) != 0x80:
                return False
            i += 2
            continue
        if c < 0xF0:
            if i + 2 >= n or (s[i + 1] & 0xC0) != 0x80 or (s[i + 2] & 0xC0) != 0x80:
                return False
            d = s[i + 1]
            if (c == 0xE0 and d < 0xA0) or (c == 0xED and d >= 0xA0):
                return False
            i += 3
            continue
        if i + 3 >= n or (s[i + 1] & 0xC0) != 0x80 or (s[i + 2] & 0xC0) != 0x80 or (s[i + 3] & 0xC0) != 0x80:
            return False
        d = s[i + 1]
        if (c == 0xF0 and d < 0x90) or (c == 0xF4 and d >= 0x90):
            return False
        i += 4
    return True


# --- a message's fields, as the entry's MessageMetadata or a batch item's SingleMessageMetadata gives them ---

cdef struct Property:
    const uint8_t *key
    Py_ssize_t key_length
    const uint8_t *value
    Py_ssize_t value_length


cdef struct Properties:  # a growing array, the properties of every message of one entry in order
    Property *items
    Py_ssize_t count
    Py_ssize_t capacity


cdef struct Item:
    const uint8_t *value
    Py_ssize_t value_length
    const uint8_t *key
    Py_ssize_t key_length
    const uint8_t *ordering_key
    Py_ssize_t ordering_key_length
    Py_ssize_t first_property   # its properties: Properties.items[first_property:first_property + property_count]
    Py_ssize_t property_count
    int64_t event_time          # NO_EVENT_TIME for none (0 on the wire)
    bint has_key
    bint has_ordering_key
    bint null_value


cdef bint add_property(Properties *props, const uint8_t *data, Py_ssize_t length, Item *item) noexcept nogil:
    """Read one KeyValue into the message's properties; False to leave the entry to the reference path (a
    malformed pair, a key given twice in one message, which a dict would keep once, or text not UTF-8)."""
    cdef Reader r
    cdef uint64_t tag
    cdef Property pair
    cdef Property *grown
    cdef bint has_key = False, has_value = False
    cdef Py_ssize_t i
    r.p, r.end, r.bad = data, data + length, False
    while r.p < r.end and not r.bad:
        tag = varint(&r)
        if (tag >> 3) == 1 and (tag & 7) == DELIMITED:
            has_key = delimited(&r, &pair.key, &pair.key_length)
        elif (tag >> 3) == 2 and (tag & 7) == DELIMITED:
            has_value = delimited(&r, &pair.value, &pair.value_length)
        elif (tag >> 3) in (1, 2) or not valid_field(tag >> 3):
            return False
        else:
            skip(&r, tag & 7)
    if r.bad or not has_key or not has_value or not utf8(pair.key, pair.key_length) \
            or not utf8(pair.value, pair.value_length):
        return False
    for i in range(item.first_property, item.first_property + item.property_count):
        if props.items[i].key_length == pair.key_length and \
                (pair.key_length == 0 or memcmp(props.items[i].key, pair.key, pair.key_length) == 0):
            return False
    if props.count == props.capacity:
        grown = <Property *>realloc(props.items, sizeof(Property) * max(16, 2 * props.capacity))
        if grown == NULL:
            return False
        props.items = grown
        props.capacity = max(16, 2 * props.capacity)
    props.items[props.count] = pair
    props.count += 1
    item.property_count += 1
    return True


cdef extern from "string.h" nogil:
    int memcmp(const void *a, const void *b, size_t n)


cdef struct Entry:  # the MessageMetadata fields the stored batch needs
    const uint8_t *producer_name
    Py_ssize_t producer_name_length
    uint64_t sequence_id
    uint64_t publish_time
    const uint8_t *replicated_from
    Py_ssize_t replicated_from_length
    const uint8_t *schema_version
    Py_ssize_t schema_version_length
    int64_t deliver_at_time
    uint64_t highest_sequence_id
    int64_t num_messages_in_batch
    uint32_t compression
    uint32_t uncompressed_size
    bint has_producer_name
    bint has_sequence_id
    bint has_publish_time
    bint has_replicated_from
    bint has_deliver_at_time
    bint has_num_messages_in_batch
    bint has_replicate_to       # (the names themselves are read in Python, by replicate_to())


cdef enum:  # what a field is to the message reader: by MessageMetadata's numbers, then SingleMessageMetadata's
    F_OTHER = 0
    F_PROPERTY
    F_KEY
    F_KEY_B64
    F_NULL_KEY
    F_EVENT_TIME
    F_ORDERING_KEY
    F_NULL_VALUE
    F_PAYLOAD_SIZE
    F_REFUSE        # a field whose meaning the reference path alone handles (encryption, chunks, markers, ...)


cdef int metadata_field(uint64_t number) noexcept nogil:
    if number == 4:
        return F_PROPERTY
    if number == 6:
        return F_KEY
    if number == 12:
        return F_EVENT_TIME
    if number == 17:
        return F_KEY_B64
    if number == 18:
        return F_ORDERING_KEY
    if number == 25:
        return F_NULL_VALUE
    if number == 30:
        return F_NULL_KEY
    if 13 <= number <= 15 or number == 20 or number == 22 or number == 23 or 26 <= number <= 29:
        return F_REFUSE  # encryption_keys/algo/param, marker_type, txnid, uuid/chunks
    return F_OTHER


cdef int single_field(uint64_t number) noexcept nogil:
    if number == 1:
        return F_PROPERTY
    if number == 2:
        return F_KEY
    if number == 3:
        return F_PAYLOAD_SIZE
    if number == 5:
        return F_EVENT_TIME
    if number == 6:
        return F_KEY_B64
    if number == 7:
        return F_ORDERING_KEY
    if number == 9:
        return F_NULL_VALUE
    if number == 10:
        return F_NULL_KEY
    return F_OTHER


cdef bint read_message(const uint8_t *data, Py_ssize_t length, bint single, Item *item, Properties *props,
                       Entry *entry, int64_t *payload_size) noexcept nogil:
    """Read a MessageMetadata (`single` False: its message fields into `item`, its entry fields into `entry`)
    or a SingleMessageMetadata (its fields into `item`, its payload_size into `payload_size`, -1 without
    one). False when the entry must take the reference path."""
    cdef Reader r
    cdef uint64_t tag, number, value
    cdef int wire, kind
    cdef const uint8_t *text
    cdef Py_ssize_t text_length
    cdef bint b64 = False, null_key = False
    r.p, r.end, r.bad = data, data + length, False
    item.first_property = props.count
    item.property_count = 0
    item.has_key = item.has_ordering_key = item.null_value = False
    item.event_time = NO_EVENT_TIME
    payload_size[0] = -1
    while r.p < r.end:
        tag = varint(&r)
        if r.bad:
            return False
        number, wire = tag >> 3, tag & 7
        if not valid_field(number):
            return False
        kind = single_field(number) if single else metadata_field(number)
        if kind == F_REFUSE:
            return False
        if kind == F_PROPERTY or kind == F_KEY or kind == F_ORDERING_KEY:
            if wire != DELIMITED or not delimited(&r, &text, &text_length):
                return False
            if kind == F_PROPERTY:
                if not add_property(props, text, text_length, item):
                    return False
            elif kind == F_KEY:
                if not utf8(text, text_length):
                    return False
                item.key, item.key_length, item.has_key = text, text_length, True
            else:
                item.ordering_key, item.ordering_key_length, item.has_ordering_key = text, text_length, True
            continue
        if kind != F_OTHER:
            if wire != VARINT:
                return False
            value = varint(&r)
            if r.bad:
                return False
            if kind == F_EVENT_TIME:
                if value > INT64_MAX:
                    return False
                item.event_time = NO_EVENT_TIME if value == 0 else <int64_t>value
            elif kind == F_NULL_VALUE:
                item.null_value = value != 0
            elif kind == F_KEY_B64:
                b64 = value != 0
            elif kind == F_NULL_KEY:
                null_key = value != 0
            else:  # F_PAYLOAD_SIZE, an int32
                if value > 0x7FFFFFFF:
                    return False
                payload_size[0] = <int64_t>value
            continue
        if single:
            skip(&r, wire)
        elif not entry_field(&r, number, wire, entry):
            return False
        if r.bad:
            return False
    if null_key:
        item.has_key = False
    elif b64 and item.has_key:
        return False  # a base64 key: the reference path decodes it (or names it when it is not base64)
    return True


cdef bint entry_field(Reader *r, uint64_t number, int wire, Entry *entry) noexcept nogil:
    """One of MessageMetadata's entry fields; False for a wire type protobuf would not take as that field."""
    cdef const uint8_t *text
    cdef Py_ssize_t text_length
    cdef uint64_t value
    if number == 1 or number == 5 or number == 16 or number == 7:
        if wire != DELIMITED or not delimited(r, &text, &text_length):
            return False
        if number == 1:
            entry.producer_name, entry.producer_name_length, entry.has_producer_name = text, text_length, True
        elif number == 5:
            entry.replicated_from, entry.replicated_from_length, entry.has_replicated_from = text, text_length, True
        elif number == 16:
            entry.schema_version, entry.schema_version_length = text, text_length
        else:
            entry.has_replicate_to = True
        return True
    if number in (2, 3, 8, 9, 11, 19, 24):
        if wire != VARINT:
            return False
        value = varint(r)
        if number == 2:
            entry.sequence_id, entry.has_sequence_id = value, True
        elif number == 3:
            entry.publish_time, entry.has_publish_time = value, True
        elif number == 8:
            if value > COMPRESSION_SNAPPY:
                return False  # an unknown codec: protobuf keeps it unknown, the reference path names it
            entry.compression = <uint32_t>value
        elif number == 9:
            entry.uncompressed_size = <uint32_t>value
        elif number == 11:
            entry.num_messages_in_batch, entry.has_num_messages_in_batch = <int64_t>(<int>value), True
        elif number == 19:
            entry.deliver_at_time, entry.has_deliver_at_time = <int64_t>value, True
        else:
            entry.highest_sequence_id = value
        return True
    skip(r, wire)
    return True


# --- the entry -------------------------------------------------------------------------------------------

cdef class SendEntry:
    """A SEND's MessageMetadata as far as storing its entry needs it, read natively (`read_entry`): its entry
    fields, and its own message fields for an entry that is not a batch."""
    cdef Entry entry
    cdef Item own
    cdef Properties props
    cdef bytes metadata         # kept alive: the fields point into it
    cdef readonly str producer_name
    cdef readonly object replicated_from
    cdef readonly list replicate_to

    def __dealloc__(self):
        free(self.props.items)

    @property
    def sequence_id(self) -> int:
        return self.entry.sequence_id

    @property
    def compression(self) -> int:
        return self.entry.compression

    @property
    def uncompressed_size(self) -> int:
        return self.entry.uncompressed_size

    @property
    def schema_version(self) -> bytes:
        return PyBytes_FromStringAndSize(<const char *>self.entry.schema_version, self.entry.schema_version_length)

    @property
    def deliver_at_time(self):
        return self.entry.deliver_at_time if self.entry.has_deliver_at_time else None


def read_entry(bytes metadata) -> SendEntry | None:
    """The entry `metadata` (a serialized MessageMetadata) describes, or None if it is one for the reference
    path: encrypted, a chunk, a marker, transactional, a base64 key, a required field missing, a field
    malformed or not as protobuf would read it."""
    cdef SendEntry out = SendEntry.__new__(SendEntry)
    cdef Entry *entry = &out.entry
    cdef int64_t unused
    cdef const uint8_t *data = <const uint8_t *>PyBytes_AS_STRING(metadata)
    memset(&out.entry, 0, sizeof(Entry))
    memset(&out.props, 0, sizeof(Properties))
    out.metadata = metadata
    if not read_message(data, len(metadata), False, &out.own, &out.props, &out.entry, &unused):
        return None
    if not (entry.has_producer_name and entry.has_sequence_id and entry.has_publish_time) \
            or entry.publish_time > INT64_MAX or entry.sequence_id > INT64_MAX:
        return None
    try:
        out.producer_name = PyUnicode_DecodeUTF8(<const char *>entry.producer_name, entry.producer_name_length,
                                                 NULL)
        out.replicated_from = None if not entry.has_replicated_from else PyUnicode_DecodeUTF8(
            <const char *>entry.replicated_from, entry.replicated_from_length, NULL)
        out.replicate_to = replicate_to(data, len(metadata)) if entry.has_replicate_to else []
    except UnicodeDecodeError:
        return None
    return out


cdef list replicate_to(const uint8_t *data, Py_ssize_t length):
    """MessageMetadata's replicate_to (field 7), in order (the fields were checked well-formed already)."""
    cdef Reader r
    cdef uint64_t tag
    cdef const uint8_t *text
    cdef Py_ssize_t text_length
    cdef list names = []
    r.p, r.end, r.bad = data, data + length, False
    while r.p < r.end and not r.bad:
        tag = varint(&r)
        if tag == (7 << 3 | DELIMITED):
            if not delimited(&r, &text, &text_length):
                break
            names.append(PyUnicode_DecodeUTF8(<const char *>text, text_length, NULL))
        else:
            skip(&r, tag & 7)
    return names


cdef struct ColumnSizes:
    Py_ssize_t values
    Py_ssize_t keys
    Py_ssize_t ordering_keys
    Py_ssize_t keys_present
    Py_ssize_t ordering_keys_present
    Py_ssize_t null_values
    Py_ssize_t with_properties


cdef class UnpackedEntry:
    """An entry's messages in the stored columns (`unpack`): `count` of them, and `source()` for the writer."""
    cdef readonly Py_ssize_t count
    cdef uint64_t publish_time
    cdef object values, keys, ordering_keys, event_times, entries, property_keys, property_values
    cdef object key_offsets, key_data, keys_validity  # for key_list: asked only on a compacted topic

    def source(self, dict attributes, int64_t now, bint log_append_time) -> BatchSource:
        """The BatchSource that stores these messages with the batch `attributes`, as PartitionWriter.source
        makes it of the reference path's lists: timestamps the entry's publish time, or on a topic that stamps
        log-append time `now` (the writer's clock), one constant either way (no column made: the encoder writes
        it for every message); the event-time column always, as the server writes it."""
        attribute_keys = attribute_values = None
        if attributes:
            attribute_keys = Column.from_list(list(attributes), "attributes keys")
            attribute_values = Column.from_list(list(attributes.values()), "attributes values")
        return batch_source(self.values, self.keys, None, self.event_times,
                            _LOG_APPEND_TIME if log_append_time else 0,
                            now if log_append_time else <int64_t>self.publish_time, self.entries,
                            self.property_keys, self.property_values, self.ordering_keys, attribute_keys,
                            attribute_values)

    def key_list(self) -> list:
        """Each message's key, None for a message without one."""
        if self.keys is None:
            return [None] * self.count
        data, offsets = self.key_data.tobytes(), self.key_offsets
        return [data[offsets[i]:offsets[i + 1]] if self._has_key(i) else None for i in range(self.count)]

    cdef bint _has_key(self, Py_ssize_t i):
        validity = self.keys_validity
        return validity is None or bool(validity[i >> 3] & (1 << (i & 7)))


def unpack(SendEntry entry, payload, Py_ssize_t max_messages) -> UnpackedEntry | None:
    """The messages of `entry` with `payload` (uncompressed) in the stored columns, as batches.unpack makes
    them, or None for the reference path: a batch that does not parse, or holds more than `max_messages`
    messages, which the reference path refuses with its own message."""
    cdef const uint8_t[::1] view = payload
    cdef const uint8_t *data = &view[0] if view.shape[0] else <const uint8_t *>b""
    cdef Py_ssize_t length = view.shape[0], count
    cdef Item *items
    cdef bint ok
    if entry.entry.has_num_messages_in_batch:
        count = entry.entry.num_messages_in_batch
        if count <= 0 or count > max_messages:
            return None
    else:
        count = 1
    items = <Item *>malloc(sizeof(Item) * count)
    if items == NULL:
        raise MemoryError()
    try:
        if entry.entry.has_num_messages_in_batch:
            entry.props.count = entry.own.first_property + entry.own.property_count  # (items' go after its own)
            with nogil:
                ok = read_items(data, length, count, items, &entry.props)
            if not ok:
                return None
        else:
            items[0] = entry.own
            items[0].value, items[0].value_length = data, length
        return columns(items, count, &entry.props, entry.entry.publish_time)
    finally:
        free(items)


cdef bint read_items(const uint8_t *data, Py_ssize_t length, Py_ssize_t count, Item *items,
                     Properties *props) noexcept nogil:
    """A batch's items, [u32 size][SingleMessageMetadata][payload] each, exactly filling `length` bytes."""
    cdef Py_ssize_t position = 0, i
    cdef uint32_t size
    cdef int64_t payload_size
    for i in range(count):
        if length - position < 4:
            return False
        size = (<uint32_t>data[position] << 24) | (<uint32_t>data[position + 1] << 16) | \
               (<uint32_t>data[position + 2] << 8) | data[position + 3]
        position += 4
        if size > <uint32_t>(length - position):
            return False
        if not read_message(data + position, size, True, &items[i], props, NULL, &payload_size):
            return False
        position += size
        if payload_size < 0 or payload_size > length - position:
            return False
        items[i].value, items[i].value_length = data + position, payload_size
        position += payload_size
    return position == length


cdef UnpackedEntry columns(Item *items, Py_ssize_t count, Properties *props, uint64_t publish_time):
    cdef ColumnSizes sizes
    cdef Py_ssize_t i
    cdef int64_t *event_view
    cdef UnpackedEntry out = UnpackedEntry.__new__(UnpackedEntry)
    memset(&sizes, 0, sizeof(ColumnSizes))
    for i in range(count):
        if not items[i].null_value:
            sizes.values += items[i].value_length
        else:
            sizes.null_values += 1
        if items[i].has_key:
            sizes.keys += items[i].key_length
            sizes.keys_present += 1
        if items[i].has_ordering_key:
            sizes.ordering_keys += items[i].ordering_key_length
            sizes.ordering_keys_present += 1
        if items[i].property_count:
            sizes.with_properties += 1
    out.count, out.publish_time = count, publish_time
    out.values = binary(items, count, 0, sizes.values, sizes.null_values > 0, "values", None)
    if sizes.keys_present:
        parts = [None, None, None]
        out.keys = binary(items, count, 1, sizes.keys, sizes.keys_present < count, "keys", parts)
        out.key_offsets, out.key_data, out.keys_validity = parts
    if sizes.ordering_keys_present:
        out.ordering_keys = binary(items, count, 2, sizes.ordering_keys, sizes.ordering_keys_present < count,
                                   "ordering_keys", None)
    out.event_times = int64s(count)
    event_view = <int64_t *>cnp.PyArray_DATA(out.event_times)
    for i in range(count):
        event_view[i] = items[i].event_time
    if sizes.with_properties:
        out.entries, out.property_keys, out.property_values = properties(items, count, props)
    return out


cdef inline object int64s(Py_ssize_t n):
    """An uninitialised int64 array (numpy's C API: np.empty costs a microsecond from here, a few a SEND)."""
    cdef cnp.npy_intp size = n
    return cnp.PyArray_EMPTY(1, &size, cnp.NPY_INT64, 0)


cdef inline object zero_bytes(Py_ssize_t n):
    cdef cnp.npy_intp size = n
    return cnp.PyArray_ZEROS(1, &size, cnp.NPY_UINT8, 0)


cdef inline object bytes_(Py_ssize_t n):
    cdef cnp.npy_intp size = n
    return cnp.PyArray_EMPTY(1, &size, cnp.NPY_UINT8, 0)


cdef Column binary(Item *items, Py_ssize_t count, int which, Py_ssize_t total, bint nullable, str argument,
                   list parts):
    """One binary column of the entry's messages: 0 values, 1 keys, 2 ordering keys (a null one: no bytes and
    its validity bit clear). `parts`, if given, gets its offsets, data and validity (None: all present)."""
    cdef int64_t *offsets_view
    cdef uint8_t *data_view
    cdef uint8_t *validity_view = NULL
    cdef Py_ssize_t i, position = 0, length
    cdef const uint8_t *source
    cdef bint present
    offsets = int64s(count + 1)
    data = bytes_(total)
    offsets_view, data_view = <int64_t *>cnp.PyArray_DATA(offsets), <uint8_t *>cnp.PyArray_DATA(data)
    validity = None
    if nullable:
        validity = zero_bytes((count + 7) // 8)
        validity_view = <uint8_t *>cnp.PyArray_DATA(validity)
    offsets_view[0] = 0
    for i in range(count):
        if which == 0:
            present, source, length = not items[i].null_value, items[i].value, items[i].value_length
        elif which == 1:
            present, source, length = items[i].has_key, items[i].key, items[i].key_length
        else:
            present, source, length = items[i].has_ordering_key, items[i].ordering_key, items[i].ordering_key_length
        if present:
            if length:
                memcpy(data_view + position, source, length)
            position += length
            if nullable:
                validity_view[i >> 3] |= 1 << (i & 7)
        offsets_view[i + 1] = position
    if parts is not None:
        parts[:] = [offsets, data, validity]
    return offsets_column(offsets, data, argument, validity)


cdef tuple properties(Item *items, Py_ssize_t count, Properties *props):
    """(entry positions, key column, value column) of the messages' properties, each message's in order."""
    cdef int64_t *entries_view
    cdef int64_t *key_offsets_view
    cdef int64_t *value_offsets_view
    cdef uint8_t *key_data_view
    cdef uint8_t *value_data_view
    cdef Py_ssize_t i, j, n = 0, key_bytes = 0, value_bytes = 0, key_position = 0, value_position = 0
    cdef Property *pair
    for i in range(count):
        n += items[i].property_count
        for j in range(items[i].first_property, items[i].first_property + items[i].property_count):
            key_bytes += props.items[j].key_length
            value_bytes += props.items[j].value_length
    entries = int64s(count + 1)
    key_offsets, value_offsets = int64s(n + 1), int64s(n + 1)
    key_data, value_data = bytes_(key_bytes), bytes_(value_bytes)
    entries_view = <int64_t *>cnp.PyArray_DATA(entries)
    key_offsets_view = <int64_t *>cnp.PyArray_DATA(key_offsets)
    value_offsets_view = <int64_t *>cnp.PyArray_DATA(value_offsets)
    key_data_view, value_data_view = <uint8_t *>cnp.PyArray_DATA(key_data), <uint8_t *>cnp.PyArray_DATA(value_data)
    entries_view[0] = key_offsets_view[0] = value_offsets_view[0] = 0
    n = 0
    for i in range(count):
        for j in range(items[i].first_property, items[i].first_property + items[i].property_count):
            pair = &props.items[j]
            if pair.key_length:
                memcpy(key_data_view + key_position, pair.key, pair.key_length)
            if pair.value_length:
                memcpy(value_data_view + value_position, pair.value, pair.value_length)
            key_position += pair.key_length
            value_position += pair.value_length
            n += 1
            key_offsets_view[n], value_offsets_view[n] = key_position, value_position
        entries_view[i + 1] = n
    return (entries, offsets_column(key_offsets, key_data, "properties keys", None),
            offsets_column(value_offsets, value_data, "properties values", None))


# --- frames ----------------------------------------------------------------------------------------------

cdef class SendFrame:
    """A SEND frame cut natively (`cut_sends`): its CommandSend's fields, whether its CRC32C matched (True
    without a checksum block), and its MessageMetadata (serialized) and payload."""
    cdef readonly uint64_t producer_id
    cdef readonly uint64_t sequence_id
    cdef readonly uint64_t highest_sequence_id
    cdef readonly int num_messages
    cdef readonly bint checksum_ok
    cdef readonly bytes metadata
    cdef readonly bytes payload

    def __init__(self, uint64_t producer_id, uint64_t sequence_id, uint64_t highest_sequence_id, int num_messages,
                 bint checksum_ok, bytes metadata, bytes payload):
        """The same of a SEND that frames.py decoded (one with fields this module leaves to it)."""
        self.producer_id, self.sequence_id, self.highest_sequence_id = producer_id, sequence_id, highest_sequence_id
        self.num_messages, self.checksum_ok, self.metadata, self.payload = num_messages, checksum_ok, metadata, payload


cdef inline uint32_t u32(const uint8_t *p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]


cdef bint read_send_command(const uint8_t *data, Py_ssize_t length, SendFrame out) noexcept:
    """A BaseCommand that is a SEND with only the fields of an ordinary one (producer and sequence ids, the
    number of messages, the highest sequence id): False for anything else (transactions, chunks, markers,
    another command), which frames.py decodes."""
    cdef Reader r, s
    cdef uint64_t tag, number
    cdef const uint8_t *send = NULL
    cdef Py_ssize_t send_length = 0
    cdef bint is_send = False, has_producer = False, has_sequence = False
    r.p, r.end, r.bad = data, data + length, False
    while r.p < r.end:
        tag = varint(&r)
        if tag == (1 << 3 | VARINT):
            is_send = varint(&r) == TYPE_SEND
        elif tag == (TYPE_SEND << 3 | DELIMITED):
            if not delimited(&r, &send, &send_length):
                return False
        else:
            return False
        if r.bad:
            return False
    if not is_send or send == NULL:
        return False
    out.num_messages, out.highest_sequence_id = 1, 0
    s.p, s.end, s.bad = send, send + send_length, False
    while s.p < s.end:
        tag = varint(&s)
        number = tag >> 3
        if (tag & 7) != VARINT or number not in (1, 2, 3, 6):
            return False
        if number == 1:
            out.producer_id, has_producer = varint(&s), True
        elif number == 2:
            out.sequence_id, has_sequence = varint(&s), True
        elif number == 3:
            out.num_messages = <int>varint(&s)
        else:
            out.highest_sequence_id = varint(&s)
        if s.bad:
            return False
    return has_producer and has_sequence


def cut_sends(buffer, Py_ssize_t position, Py_ssize_t max_frame_size) -> tuple:
    """The SEND frames that follow one another from `position` in `buffer`, each whole and of the ordinary
    kind (read_send_command), and the position after the last: ([], position) if the frame there is
    anything else, cut short, or malformed, which is then frames.py's to decode (or to refuse, naming why)."""
    cdef const uint8_t[::1] view = buffer
    cdef Py_ssize_t length = view.shape[0], total, command_size, rest, metadata_size
    cdef const uint8_t *frame
    cdef const uint8_t *body
    cdef SendFrame out
    cdef list frames = []
    while length - position >= 8:
        frame = &view[position]
        total = u32(frame)
        if total < 4 or total > max_frame_size or length - position - 4 < total:
            break
        command_size = u32(frame + 4)
        if command_size > total - 4:
            break
        out = SendFrame.__new__(SendFrame)
        if not read_send_command(frame + 8, command_size, out):
            break
        body = frame + 8 + command_size
        rest = total - 4 - command_size
        if rest >= 2 and ((body[0] << 8) | body[1]) == MAGIC_BROKER_ENTRY_METADATA:
            break  # (a client never sends it; frames.py steps over it)
        out.checksum_ok = True
        if rest >= 6 and ((body[0] << 8) | body[1]) == MAGIC_CRC32C:
            out.checksum_ok = seglog_crc32c(0, body + 6, rest - 6) == u32(body + 2)
            body += 6
            rest -= 6
        if rest < 4:
            break
        metadata_size = u32(body)
        if metadata_size > rest - 4:
            break
        out.metadata = PyBytes_FromStringAndSize(<const char *>body + 4, metadata_size)
        out.payload = PyBytes_FromStringAndSize(<const char *>body + 4 + metadata_size, rest - 4 - metadata_size)
        frames.append(out)
        position += 4 + total
    return frames, position


cdef inline void put_u32(uint8_t *out, uint32_t value) noexcept nogil:
    out[0], out[1], out[2], out[3] = value >> 24, (value >> 16) & 0xFF, (value >> 8) & 0xFF, value & 0xFF


cdef Py_ssize_t put_varint(uint8_t *out, uint64_t value) noexcept nogil:
    cdef Py_ssize_t n = 0
    while value >= 0x80:
        out[n] = <uint8_t>(value | 0x80)
        value >>= 7
        n += 1
    out[n] = <uint8_t>value
    return n + 1


cdef Py_ssize_t put_field(uint8_t *out, int field, uint64_t value) noexcept nogil:
    out[0] = <uint8_t>(field << 3 | VARINT)
    return 1 + put_varint(out + 1, value)


def send_receipt(uint64_t producer_id, uint64_t sequence_id, uint64_t highest_sequence_id, uint64_t ledger_id,
                 uint64_t entry_id) -> bytes:
    """A SEND_RECEIPT frame, the bytes protobuf and frames.encode_command make of BaseCommand(type
    SEND_RECEIPT, send_receipt: producer_id, sequence_id, message_id (ledger_id, entry_id),
    highest_sequence_id)."""
    cdef uint8_t message_id[24]
    cdef uint8_t receipt[80]
    cdef uint8_t frame[100]
    cdef Py_ssize_t id_size, receipt_size, command_size
    id_size = put_field(message_id, 1, ledger_id)
    id_size += put_field(message_id + id_size, 2, entry_id)
    receipt_size = put_field(receipt, 1, producer_id)
    receipt_size += put_field(receipt + receipt_size, 2, sequence_id)
    receipt[receipt_size] = 3 << 3 | DELIMITED
    receipt_size += 1
    receipt_size += put_varint(receipt + receipt_size, id_size)
    memcpy(receipt + receipt_size, message_id, id_size)
    receipt_size += id_size
    receipt_size += put_field(receipt + receipt_size, 4, highest_sequence_id)
    command_size = put_field(frame + 8, 1, TYPE_SEND_RECEIPT)
    frame[8 + command_size] = TYPE_SEND_RECEIPT << 3 | DELIMITED
    command_size += 1
    command_size += put_varint(frame + 8 + command_size, receipt_size)
    memcpy(frame + 8 + command_size, receipt, receipt_size)
    command_size += receipt_size
    put_u32(frame, command_size + 4)
    put_u32(frame + 4, command_size)
    return PyBytes_FromStringAndSize(<const char *>frame, 8 + command_size)
