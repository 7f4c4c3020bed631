from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CompressionType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NONE: _ClassVar[CompressionType]
    LZ4: _ClassVar[CompressionType]
    ZLIB: _ClassVar[CompressionType]
    ZSTD: _ClassVar[CompressionType]
    SNAPPY: _ClassVar[CompressionType]

class ServerError(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UnknownError: _ClassVar[ServerError]
    MetadataError: _ClassVar[ServerError]
    PersistenceError: _ClassVar[ServerError]
    AuthenticationError: _ClassVar[ServerError]
    AuthorizationError: _ClassVar[ServerError]
    ConsumerBusy: _ClassVar[ServerError]
    ServiceNotReady: _ClassVar[ServerError]
    ProducerBlockedQuotaExceededError: _ClassVar[ServerError]
    ProducerBlockedQuotaExceededException: _ClassVar[ServerError]
    ChecksumError: _ClassVar[ServerError]
    UnsupportedVersionError: _ClassVar[ServerError]
    TopicNotFound: _ClassVar[ServerError]
    SubscriptionNotFound: _ClassVar[ServerError]
    ConsumerNotFound: _ClassVar[ServerError]
    TooManyRequests: _ClassVar[ServerError]
    TopicTerminatedError: _ClassVar[ServerError]
    ProducerBusy: _ClassVar[ServerError]
    InvalidTopicName: _ClassVar[ServerError]
    IncompatibleSchema: _ClassVar[ServerError]
    ConsumerAssignError: _ClassVar[ServerError]
    TransactionCoordinatorNotFound: _ClassVar[ServerError]
    InvalidTxnStatus: _ClassVar[ServerError]
    NotAllowedError: _ClassVar[ServerError]
    TransactionConflict: _ClassVar[ServerError]
    TransactionNotFound: _ClassVar[ServerError]
    ProducerFenced: _ClassVar[ServerError]

class ProducerAccessMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    Shared: _ClassVar[ProducerAccessMode]
    Exclusive: _ClassVar[ProducerAccessMode]
    WaitForExclusive: _ClassVar[ProducerAccessMode]
    ExclusiveWithFencing: _ClassVar[ProducerAccessMode]
NONE: CompressionType
LZ4: CompressionType
ZLIB: CompressionType
ZSTD: CompressionType
SNAPPY: CompressionType
UnknownError: ServerError
MetadataError: ServerError
PersistenceError: ServerError
AuthenticationError: ServerError
AuthorizationError: ServerError
ConsumerBusy: ServerError
ServiceNotReady: ServerError
ProducerBlockedQuotaExceededError: ServerError
ProducerBlockedQuotaExceededException: ServerError
ChecksumError: ServerError
UnsupportedVersionError: ServerError
TopicNotFound: ServerError
SubscriptionNotFound: ServerError
ConsumerNotFound: ServerError
TooManyRequests: ServerError
TopicTerminatedError: ServerError
ProducerBusy: ServerError
InvalidTopicName: ServerError
IncompatibleSchema: ServerError
ConsumerAssignError: ServerError
TransactionCoordinatorNotFound: ServerError
InvalidTxnStatus: ServerError
NotAllowedError: ServerError
TransactionConflict: ServerError
TransactionNotFound: ServerError
ProducerFenced: ServerError
Shared: ProducerAccessMode
Exclusive: ProducerAccessMode
WaitForExclusive: ProducerAccessMode
ExclusiveWithFencing: ProducerAccessMode

class KeyValue(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class EncryptionKeys(_message.Message):
    __slots__ = ("key", "value", "metadata")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: bytes
    metadata: _containers.RepeatedCompositeFieldContainer[KeyValue]
    def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ..., metadata: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ...) -> None: ...

class Schema(_message.Message):
    __slots__ = ("name", "schema_data", "type", "properties")
    class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        String: _ClassVar[Schema.Type]
        Json: _ClassVar[Schema.Type]
        Protobuf: _ClassVar[Schema.Type]
        Avro: _ClassVar[Schema.Type]
        Bool: _ClassVar[Schema.Type]
        Int8: _ClassVar[Schema.Type]
        Int16: _ClassVar[Schema.Type]
        Int32: _ClassVar[Schema.Type]
        Int64: _ClassVar[Schema.Type]
        Float: _ClassVar[Schema.Type]
        Double: _ClassVar[Schema.Type]
        Date: _ClassVar[Schema.Type]
        Time: _ClassVar[Schema.Type]
        Timestamp: _ClassVar[Schema.Type]
        KeyValue: _ClassVar[Schema.Type]
        Instant: _ClassVar[Schema.Type]
        LocalDate: _ClassVar[Schema.Type]
        LocalTime: _ClassVar[Schema.Type]
        LocalDateTime: _ClassVar[Schema.Type]
        ProtobufNative: _ClassVar[Schema.Type]
        AutoConsume: _ClassVar[Schema.Type]
    String: Schema.Type
    Json: Schema.Type
    Protobuf: Schema.Type
    Avro: Schema.Type
    Bool: Schema.Type
    Int8: Schema.Type
    Int16: Schema.Type
    Int32: Schema.Type
    Int64: Schema.Type
    Float: Schema.Type
    Double: Schema.Type
    Date: Schema.Type
    Time: Schema.Type
    Timestamp: Schema.Type
    KeyValue: Schema.Type
    Instant: Schema.Type
    LocalDate: Schema.Type
    LocalTime: Schema.Type
    LocalDateTime: Schema.Type
    ProtobufNative: Schema.Type
    AutoConsume: Schema.Type
    NAME_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_DATA_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    name: str
    schema_data: bytes
    type: Schema.Type
    properties: _containers.RepeatedCompositeFieldContainer[KeyValue]
    def __init__(self, name: _Optional[str] = ..., schema_data: _Optional[bytes] = ..., type: _Optional[_Union[Schema.Type, str]] = ..., properties: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ...) -> None: ...

class MessageIdData(_message.Message):
    __slots__ = ("ledger_id", "entry_id", "partition", "batch_index", "ack_set", "batch_size", "first_chunk_message_id")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    BATCH_INDEX_FIELD_NUMBER: _ClassVar[int]
    ACK_SET_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    FIRST_CHUNK_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    ledger_id: int
    entry_id: int
    partition: int
    batch_index: int
    ack_set: _containers.RepeatedScalarFieldContainer[int]
    batch_size: int
    first_chunk_message_id: MessageIdData
    def __init__(self, ledger_id: _Optional[int] = ..., entry_id: _Optional[int] = ..., partition: _Optional[int] = ..., batch_index: _Optional[int] = ..., ack_set: _Optional[_Iterable[int]] = ..., batch_size: _Optional[int] = ..., first_chunk_message_id: _Optional[_Union[MessageIdData, _Mapping]] = ...) -> None: ...

class MessageMetadata(_message.Message):
    __slots__ = ("producer_name", "sequence_id", "publish_time", "properties", "replicated_from", "partition_key", "replicate_to", "compression", "uncompressed_size", "num_messages_in_batch", "event_time", "encryption_keys", "encryption_algo", "encryption_param", "schema_version", "partition_key_b64_encoded", "ordering_key", "deliver_at_time", "marker_type", "txnid_least_bits", "txnid_most_bits", "highest_sequence_id", "null_value", "uuid", "num_chunks_from_msg", "total_chunk_msg_size", "chunk_id", "null_partition_key")
    PRODUCER_NAME_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    PUBLISH_TIME_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    REPLICATED_FROM_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEY_FIELD_NUMBER: _ClassVar[int]
    REPLICATE_TO_FIELD_NUMBER: _ClassVar[int]
    COMPRESSION_FIELD_NUMBER: _ClassVar[int]
    UNCOMPRESSED_SIZE_FIELD_NUMBER: _ClassVar[int]
    NUM_MESSAGES_IN_BATCH_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    ENCRYPTION_KEYS_FIELD_NUMBER: _ClassVar[int]
    ENCRYPTION_ALGO_FIELD_NUMBER: _ClassVar[int]
    ENCRYPTION_PARAM_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEY_B64_ENCODED_FIELD_NUMBER: _ClassVar[int]
    ORDERING_KEY_FIELD_NUMBER: _ClassVar[int]
    DELIVER_AT_TIME_FIELD_NUMBER: _ClassVar[int]
    MARKER_TYPE_FIELD_NUMBER: _ClassVar[int]
    TXNID_LEAST_BITS_FIELD_NUMBER: _ClassVar[int]
    TXNID_MOST_BITS_FIELD_NUMBER: _ClassVar[int]
    HIGHEST_SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    NULL_VALUE_FIELD_NUMBER: _ClassVar[int]
    UUID_FIELD_NUMBER: _ClassVar[int]
    NUM_CHUNKS_FROM_MSG_FIELD_NUMBER: _ClassVar[int]
    TOTAL_CHUNK_MSG_SIZE_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    NULL_PARTITION_KEY_FIELD_NUMBER: _ClassVar[int]
    producer_name: str
    sequence_id: int
    publish_time: int
    properties: _containers.RepeatedCompositeFieldContainer[KeyValue]
    replicated_from: str
    partition_key: str
    replicate_to: _containers.RepeatedScalarFieldContainer[str]
    compression: CompressionType
    uncompressed_size: int
    num_messages_in_batch: int
    event_time: int
    encryption_keys: _containers.RepeatedCompositeFieldContainer[EncryptionKeys]
    encryption_algo: str
    encryption_param: bytes
    schema_version: bytes
    partition_key_b64_encoded: bool
    ordering_key: bytes
    deliver_at_time: int
    marker_type: int
    txnid_least_bits: int
    txnid_most_bits: int
    highest_sequence_id: int
    null_value: bool
    uuid: str
    num_chunks_from_msg: int
    total_chunk_msg_size: int
    chunk_id: int
    null_partition_key: bool
    def __init__(self, producer_name: _Optional[str] = ..., sequence_id: _Optional[int] = ..., publish_time: _Optional[int] = ..., properties: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ..., replicated_from: _Optional[str] = ..., partition_key: _Optional[str] = ..., replicate_to: _Optional[_Iterable[str]] = ..., compression: _Optional[_Union[CompressionType, str]] = ..., uncompressed_size: _Optional[int] = ..., num_messages_in_batch: _Optional[int] = ..., event_time: _Optional[int] = ..., encryption_keys: _Optional[_Iterable[_Union[EncryptionKeys, _Mapping]]] = ..., encryption_algo: _Optional[str] = ..., encryption_param: _Optional[bytes] = ..., schema_version: _Optional[bytes] = ..., partition_key_b64_encoded: _Optional[bool] = ..., ordering_key: _Optional[bytes] = ..., deliver_at_time: _Optional[int] = ..., marker_type: _Optional[int] = ..., txnid_least_bits: _Optional[int] = ..., txnid_most_bits: _Optional[int] = ..., highest_sequence_id: _Optional[int] = ..., null_value: _Optional[bool] = ..., uuid: _Optional[str] = ..., num_chunks_from_msg: _Optional[int] = ..., total_chunk_msg_size: _Optional[int] = ..., chunk_id: _Optional[int] = ..., null_partition_key: _Optional[bool] = ...) -> None: ...

class SingleMessageMetadata(_message.Message):
    __slots__ = ("properties", "partition_key", "payload_size", "compacted_out", "event_time", "partition_key_b64_encoded", "ordering_key", "sequence_id", "null_value", "null_partition_key")
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEY_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_SIZE_FIELD_NUMBER: _ClassVar[int]
    COMPACTED_OUT_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEY_B64_ENCODED_FIELD_NUMBER: _ClassVar[int]
    ORDERING_KEY_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    NULL_VALUE_FIELD_NUMBER: _ClassVar[int]
    NULL_PARTITION_KEY_FIELD_NUMBER: _ClassVar[int]
    properties: _containers.RepeatedCompositeFieldContainer[KeyValue]
    partition_key: str
    payload_size: int
    compacted_out: bool
    event_time: int
    partition_key_b64_encoded: bool
    ordering_key: bytes
    sequence_id: int
    null_value: bool
    null_partition_key: bool
    def __init__(self, properties: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ..., partition_key: _Optional[str] = ..., payload_size: _Optional[int] = ..., compacted_out: _Optional[bool] = ..., event_time: _Optional[int] = ..., partition_key_b64_encoded: _Optional[bool] = ..., ordering_key: _Optional[bytes] = ..., sequence_id: _Optional[int] = ..., null_value: _Optional[bool] = ..., null_partition_key: _Optional[bool] = ...) -> None: ...

class FeatureFlags(_message.Message):
    __slots__ = ("supports_auth_refresh", "supports_broker_entry_metadata", "supports_partial_producer", "supports_topic_watchers")
    SUPPORTS_AUTH_REFRESH_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_BROKER_ENTRY_METADATA_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_PARTIAL_PRODUCER_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_TOPIC_WATCHERS_FIELD_NUMBER: _ClassVar[int]
    supports_auth_refresh: bool
    supports_broker_entry_metadata: bool
    supports_partial_producer: bool
    supports_topic_watchers: bool
    def __init__(self, supports_auth_refresh: _Optional[bool] = ..., supports_broker_entry_metadata: _Optional[bool] = ..., supports_partial_producer: _Optional[bool] = ..., supports_topic_watchers: _Optional[bool] = ...) -> None: ...

class CommandConnect(_message.Message):
    __slots__ = ("client_version", "auth_data", "protocol_version", "auth_method_name", "proxy_to_broker_url", "feature_flags")
    CLIENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    AUTH_DATA_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    AUTH_METHOD_NAME_FIELD_NUMBER: _ClassVar[int]
    PROXY_TO_BROKER_URL_FIELD_NUMBER: _ClassVar[int]
    FEATURE_FLAGS_FIELD_NUMBER: _ClassVar[int]
    client_version: str
    auth_data: bytes
    protocol_version: int
    auth_method_name: str
    proxy_to_broker_url: str
    feature_flags: FeatureFlags
    def __init__(self, client_version: _Optional[str] = ..., auth_data: _Optional[bytes] = ..., protocol_version: _Optional[int] = ..., auth_method_name: _Optional[str] = ..., proxy_to_broker_url: _Optional[str] = ..., feature_flags: _Optional[_Union[FeatureFlags, _Mapping]] = ...) -> None: ...

class CommandConnected(_message.Message):
    __slots__ = ("server_version", "protocol_version", "max_message_size", "feature_flags")
    SERVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    FEATURE_FLAGS_FIELD_NUMBER: _ClassVar[int]
    server_version: str
    protocol_version: int
    max_message_size: int
    feature_flags: FeatureFlags
    def __init__(self, server_version: _Optional[str] = ..., protocol_version: _Optional[int] = ..., max_message_size: _Optional[int] = ..., feature_flags: _Optional[_Union[FeatureFlags, _Mapping]] = ...) -> None: ...

class IntRange(_message.Message):
    __slots__ = ("start", "end")
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    start: int
    end: int
    def __init__(self, start: _Optional[int] = ..., end: _Optional[int] = ...) -> None: ...

class KeySharedMeta(_message.Message):
    __slots__ = ("keySharedMode", "hashRanges", "allowOutOfOrderDelivery")
    class KeySharedMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        AUTO_SPLIT: _ClassVar[KeySharedMeta.KeySharedMode]
        STICKY: _ClassVar[KeySharedMeta.KeySharedMode]
    AUTO_SPLIT: KeySharedMeta.KeySharedMode
    STICKY: KeySharedMeta.KeySharedMode
    KEYSHAREDMODE_FIELD_NUMBER: _ClassVar[int]
    HASHRANGES_FIELD_NUMBER: _ClassVar[int]
    ALLOWOUTOFORDERDELIVERY_FIELD_NUMBER: _ClassVar[int]
    keySharedMode: KeySharedMeta.KeySharedMode
    hashRanges: _containers.RepeatedCompositeFieldContainer[IntRange]
    allowOutOfOrderDelivery: bool
    def __init__(self, keySharedMode: _Optional[_Union[KeySharedMeta.KeySharedMode, str]] = ..., hashRanges: _Optional[_Iterable[_Union[IntRange, _Mapping]]] = ..., allowOutOfOrderDelivery: _Optional[bool] = ...) -> None: ...

class CommandSubscribe(_message.Message):
    __slots__ = ("topic", "subscription", "sub_type", "consumer_id", "request_id", "consumer_name", "priority_level", "durable", "start_message_id", "metadata", "read_compacted", "schema", "initial_position", "replicate_subscription_state", "force_topic_creation", "start_message_rollback_duration_sec", "keySharedMeta", "consumer_epoch")
    class SubType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        Exclusive: _ClassVar[CommandSubscribe.SubType]
        Shared: _ClassVar[CommandSubscribe.SubType]
        Failover: _ClassVar[CommandSubscribe.SubType]
        Key_Shared: _ClassVar[CommandSubscribe.SubType]
    Exclusive: CommandSubscribe.SubType
    Shared: CommandSubscribe.SubType
    Failover: CommandSubscribe.SubType
    Key_Shared: CommandSubscribe.SubType
    class InitialPosition(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        Latest: _ClassVar[CommandSubscribe.InitialPosition]
        Earliest: _ClassVar[CommandSubscribe.InitialPosition]
    Latest: CommandSubscribe.InitialPosition
    Earliest: CommandSubscribe.InitialPosition
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_FIELD_NUMBER: _ClassVar[int]
    SUB_TYPE_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_NAME_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_LEVEL_FIELD_NUMBER: _ClassVar[int]
    DURABLE_FIELD_NUMBER: _ClassVar[int]
    START_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    READ_COMPACTED_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    INITIAL_POSITION_FIELD_NUMBER: _ClassVar[int]
    REPLICATE_SUBSCRIPTION_STATE_FIELD_NUMBER: _ClassVar[int]
    FORCE_TOPIC_CREATION_FIELD_NUMBER: _ClassVar[int]
    START_MESSAGE_ROLLBACK_DURATION_SEC_FIELD_NUMBER: _ClassVar[int]
    KEYSHAREDMETA_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    topic: str
    subscription: str
    sub_type: CommandSubscribe.SubType
    consumer_id: int
    request_id: int
    consumer_name: str
    priority_level: int
    durable: bool
    start_message_id: MessageIdData
    metadata: _containers.RepeatedCompositeFieldContainer[KeyValue]
    read_compacted: bool
    schema: Schema
    initial_position: CommandSubscribe.InitialPosition
    replicate_subscription_state: bool
    force_topic_creation: bool
    start_message_rollback_duration_sec: int
    keySharedMeta: KeySharedMeta
    consumer_epoch: int
    def __init__(self, topic: _Optional[str] = ..., subscription: _Optional[str] = ..., sub_type: _Optional[_Union[CommandSubscribe.SubType, str]] = ..., consumer_id: _Optional[int] = ..., request_id: _Optional[int] = ..., consumer_name: _Optional[str] = ..., priority_level: _Optional[int] = ..., durable: _Optional[bool] = ..., start_message_id: _Optional[_Union[MessageIdData, _Mapping]] = ..., metadata: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ..., read_compacted: _Optional[bool] = ..., schema: _Optional[_Union[Schema, _Mapping]] = ..., initial_position: _Optional[_Union[CommandSubscribe.InitialPosition, str]] = ..., replicate_subscription_state: _Optional[bool] = ..., force_topic_creation: _Optional[bool] = ..., start_message_rollback_duration_sec: _Optional[int] = ..., keySharedMeta: _Optional[_Union[KeySharedMeta, _Mapping]] = ..., consumer_epoch: _Optional[int] = ...) -> None: ...

class CommandFlow(_message.Message):
    __slots__ = ("consumer_id", "message_permits")
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_PERMITS_FIELD_NUMBER: _ClassVar[int]
    consumer_id: int
    message_permits: int
    def __init__(self, consumer_id: _Optional[int] = ..., message_permits: _Optional[int] = ...) -> None: ...

class CommandMessage(_message.Message):
    __slots__ = ("consumer_id", "message_id", "redelivery_count", "ack_set", "consumer_epoch")
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    REDELIVERY_COUNT_FIELD_NUMBER: _ClassVar[int]
    ACK_SET_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    consumer_id: int
    message_id: MessageIdData
    redelivery_count: int
    ack_set: _containers.RepeatedScalarFieldContainer[int]
    consumer_epoch: int
    def __init__(self, consumer_id: _Optional[int] = ..., message_id: _Optional[_Union[MessageIdData, _Mapping]] = ..., redelivery_count: _Optional[int] = ..., ack_set: _Optional[_Iterable[int]] = ..., consumer_epoch: _Optional[int] = ...) -> None: ...

class KeyLongValue(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: int
    def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...

class CommandAck(_message.Message):
    __slots__ = ("consumer_id", "ack_type", "message_id", "validation_error", "properties", "txnid_least_bits", "txnid_most_bits", "request_id")
    class AckType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        Individual: _ClassVar[CommandAck.AckType]
        Cumulative: _ClassVar[CommandAck.AckType]
    Individual: CommandAck.AckType
    Cumulative: CommandAck.AckType
    class ValidationError(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UncompressedSizeCorruption: _ClassVar[CommandAck.ValidationError]
        DecompressionError: _ClassVar[CommandAck.ValidationError]
        ChecksumMismatch: _ClassVar[CommandAck.ValidationError]
        BatchDeSerializeError: _ClassVar[CommandAck.ValidationError]
        DecryptionError: _ClassVar[CommandAck.ValidationError]
    UncompressedSizeCorruption: CommandAck.ValidationError
    DecompressionError: CommandAck.ValidationError
    ChecksumMismatch: CommandAck.ValidationError
    BatchDeSerializeError: CommandAck.ValidationError
    DecryptionError: CommandAck.ValidationError
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    ACK_TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    VALIDATION_ERROR_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    TXNID_LEAST_BITS_FIELD_NUMBER: _ClassVar[int]
    TXNID_MOST_BITS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    consumer_id: int
    ack_type: CommandAck.AckType
    message_id: _containers.RepeatedCompositeFieldContainer[MessageIdData]
    validation_error: CommandAck.ValidationError
    properties: _containers.RepeatedCompositeFieldContainer[KeyLongValue]
    txnid_least_bits: int
    txnid_most_bits: int
    request_id: int
    def __init__(self, consumer_id: _Optional[int] = ..., ack_type: _Optional[_Union[CommandAck.AckType, str]] = ..., message_id: _Optional[_Iterable[_Union[MessageIdData, _Mapping]]] = ..., validation_error: _Optional[_Union[CommandAck.ValidationError, str]] = ..., properties: _Optional[_Iterable[_Union[KeyLongValue, _Mapping]]] = ..., txnid_least_bits: _Optional[int] = ..., txnid_most_bits: _Optional[int] = ..., request_id: _Optional[int] = ...) -> None: ...

class CommandAckResponse(_message.Message):
    __slots__ = ("consumer_id", "txnid_least_bits", "txnid_most_bits", "error", "message", "request_id")
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    TXNID_LEAST_BITS_FIELD_NUMBER: _ClassVar[int]
    TXNID_MOST_BITS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    consumer_id: int
    txnid_least_bits: int
    txnid_most_bits: int
    error: ServerError
    message: str
    request_id: int
    def __init__(self, consumer_id: _Optional[int] = ..., txnid_least_bits: _Optional[int] = ..., txnid_most_bits: _Optional[int] = ..., error: _Optional[_Union[ServerError, str]] = ..., message: _Optional[str] = ..., request_id: _Optional[int] = ...) -> None: ...

class CommandUnsubscribe(_message.Message):
    __slots__ = ("consumer_id", "request_id", "force")
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    consumer_id: int
    request_id: int
    force: bool
    def __init__(self, consumer_id: _Optional[int] = ..., request_id: _Optional[int] = ..., force: _Optional[bool] = ...) -> None: ...

class CommandRedeliverUnacknowledgedMessages(_message.Message):
    __slots__ = ("consumer_id", "message_ids", "consumer_epoch")
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_IDS_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    consumer_id: int
    message_ids: _containers.RepeatedCompositeFieldContainer[MessageIdData]
    consumer_epoch: int
    def __init__(self, consumer_id: _Optional[int] = ..., message_ids: _Optional[_Iterable[_Union[MessageIdData, _Mapping]]] = ..., consumer_epoch: _Optional[int] = ...) -> None: ...

class CommandSeek(_message.Message):
    __slots__ = ("consumer_id", "request_id", "message_id", "message_publish_time")
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_PUBLISH_TIME_FIELD_NUMBER: _ClassVar[int]
    consumer_id: int
    request_id: int
    message_id: MessageIdData
    message_publish_time: int
    def __init__(self, consumer_id: _Optional[int] = ..., request_id: _Optional[int] = ..., message_id: _Optional[_Union[MessageIdData, _Mapping]] = ..., message_publish_time: _Optional[int] = ...) -> None: ...

class CommandGetLastMessageId(_message.Message):
    __slots__ = ("consumer_id", "request_id")
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    consumer_id: int
    request_id: int
    def __init__(self, consumer_id: _Optional[int] = ..., request_id: _Optional[int] = ...) -> None: ...

class CommandGetLastMessageIdResponse(_message.Message):
    __slots__ = ("last_message_id", "request_id", "consumer_mark_delete_position")
    LAST_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_MARK_DELETE_POSITION_FIELD_NUMBER: _ClassVar[int]
    last_message_id: MessageIdData
    request_id: int
    consumer_mark_delete_position: MessageIdData
    def __init__(self, last_message_id: _Optional[_Union[MessageIdData, _Mapping]] = ..., request_id: _Optional[int] = ..., consumer_mark_delete_position: _Optional[_Union[MessageIdData, _Mapping]] = ...) -> None: ...

class CommandProducer(_message.Message):
    __slots__ = ("topic", "producer_id", "request_id", "producer_name", "encrypted", "metadata", "schema", "epoch", "user_provided_producer_name", "producer_access_mode", "topic_epoch", "txn_enabled", "initial_subscription_name")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_NAME_FIELD_NUMBER: _ClassVar[int]
    ENCRYPTED_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    USER_PROVIDED_PRODUCER_NAME_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ACCESS_MODE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TXN_ENABLED_FIELD_NUMBER: _ClassVar[int]
    INITIAL_SUBSCRIPTION_NAME_FIELD_NUMBER: _ClassVar[int]
    topic: str
    producer_id: int
    request_id: int
    producer_name: str
    encrypted: bool
    metadata: _containers.RepeatedCompositeFieldContainer[KeyValue]
    schema: Schema
    epoch: int
    user_provided_producer_name: bool
    producer_access_mode: ProducerAccessMode
    topic_epoch: int
    txn_enabled: bool
    initial_subscription_name: str
    def __init__(self, topic: _Optional[str] = ..., producer_id: _Optional[int] = ..., request_id: _Optional[int] = ..., producer_name: _Optional[str] = ..., encrypted: _Optional[bool] = ..., metadata: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ..., schema: _Optional[_Union[Schema, _Mapping]] = ..., epoch: _Optional[int] = ..., user_provided_producer_name: _Optional[bool] = ..., producer_access_mode: _Optional[_Union[ProducerAccessMode, str]] = ..., topic_epoch: _Optional[int] = ..., txn_enabled: _Optional[bool] = ..., initial_subscription_name: _Optional[str] = ...) -> None: ...

class CommandProducerSuccess(_message.Message):
    __slots__ = ("request_id", "producer_name", "last_sequence_id", "schema_version", "topic_epoch", "producer_ready")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_NAME_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    TOPIC_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_READY_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    producer_name: str
    last_sequence_id: int
    schema_version: bytes
    topic_epoch: int
    producer_ready: bool
    def __init__(self, request_id: _Optional[int] = ..., producer_name: _Optional[str] = ..., last_sequence_id: _Optional[int] = ..., schema_version: _Optional[bytes] = ..., topic_epoch: _Optional[int] = ..., producer_ready: _Optional[bool] = ...) -> None: ...

class CommandSend(_message.Message):
    __slots__ = ("producer_id", "sequence_id", "num_messages", "txnid_least_bits", "txnid_most_bits", "highest_sequence_id", "is_chunk", "marker", "message_id")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    NUM_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    TXNID_LEAST_BITS_FIELD_NUMBER: _ClassVar[int]
    TXNID_MOST_BITS_FIELD_NUMBER: _ClassVar[int]
    HIGHEST_SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    IS_CHUNK_FIELD_NUMBER: _ClassVar[int]
    MARKER_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    sequence_id: int
    num_messages: int
    txnid_least_bits: int
    txnid_most_bits: int
    highest_sequence_id: int
    is_chunk: bool
    marker: bool
    message_id: MessageIdData
    def __init__(self, producer_id: _Optional[int] = ..., sequence_id: _Optional[int] = ..., num_messages: _Optional[int] = ..., txnid_least_bits: _Optional[int] = ..., txnid_most_bits: _Optional[int] = ..., highest_sequence_id: _Optional[int] = ..., is_chunk: _Optional[bool] = ..., marker: _Optional[bool] = ..., message_id: _Optional[_Union[MessageIdData, _Mapping]] = ...) -> None: ...

class CommandSendReceipt(_message.Message):
    __slots__ = ("producer_id", "sequence_id", "message_id", "highest_sequence_id")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    HIGHEST_SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    sequence_id: int
    message_id: MessageIdData
    highest_sequence_id: int
    def __init__(self, producer_id: _Optional[int] = ..., sequence_id: _Optional[int] = ..., message_id: _Optional[_Union[MessageIdData, _Mapping]] = ..., highest_sequence_id: _Optional[int] = ...) -> None: ...

class CommandSendError(_message.Message):
    __slots__ = ("producer_id", "sequence_id", "error", "message")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    sequence_id: int
    error: ServerError
    message: str
    def __init__(self, producer_id: _Optional[int] = ..., sequence_id: _Optional[int] = ..., error: _Optional[_Union[ServerError, str]] = ..., message: _Optional[str] = ...) -> None: ...

class CommandCloseProducer(_message.Message):
    __slots__ = ("producer_id", "request_id", "assigned_broker_service_url", "assigned_broker_service_url_tls")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ASSIGNED_BROKER_SERVICE_URL_FIELD_NUMBER: _ClassVar[int]
    ASSIGNED_BROKER_SERVICE_URL_TLS_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    request_id: int
    assigned_broker_service_url: str
    assigned_broker_service_url_tls: str
    def __init__(self, producer_id: _Optional[int] = ..., request_id: _Optional[int] = ..., assigned_broker_service_url: _Optional[str] = ..., assigned_broker_service_url_tls: _Optional[str] = ...) -> None: ...

class CommandCloseConsumer(_message.Message):
    __slots__ = ("consumer_id", "request_id", "assigned_broker_service_url", "assigned_broker_service_url_tls")
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ASSIGNED_BROKER_SERVICE_URL_FIELD_NUMBER: _ClassVar[int]
    ASSIGNED_BROKER_SERVICE_URL_TLS_FIELD_NUMBER: _ClassVar[int]
    consumer_id: int
    request_id: int
    assigned_broker_service_url: str
    assigned_broker_service_url_tls: str
    def __init__(self, consumer_id: _Optional[int] = ..., request_id: _Optional[int] = ..., assigned_broker_service_url: _Optional[str] = ..., assigned_broker_service_url_tls: _Optional[str] = ...) -> None: ...

class CommandSuccess(_message.Message):
    __slots__ = ("request_id", "schema")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    schema: Schema
    def __init__(self, request_id: _Optional[int] = ..., schema: _Optional[_Union[Schema, _Mapping]] = ...) -> None: ...

class CommandError(_message.Message):
    __slots__ = ("request_id", "error", "message")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    error: ServerError
    message: str
    def __init__(self, request_id: _Optional[int] = ..., error: _Optional[_Union[ServerError, str]] = ..., message: _Optional[str] = ...) -> None: ...

class CommandPing(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CommandPong(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CommandPartitionedTopicMetadata(_message.Message):
    __slots__ = ("topic", "request_id", "metadata_auto_creation_enabled")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_AUTO_CREATION_ENABLED_FIELD_NUMBER: _ClassVar[int]
    topic: str
    request_id: int
    metadata_auto_creation_enabled: bool
    def __init__(self, topic: _Optional[str] = ..., request_id: _Optional[int] = ..., metadata_auto_creation_enabled: _Optional[bool] = ...) -> None: ...

class CommandPartitionedTopicMetadataResponse(_message.Message):
    __slots__ = ("partitions", "request_id", "response", "error", "message")
    class LookupType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        Success: _ClassVar[CommandPartitionedTopicMetadataResponse.LookupType]
        Failed: _ClassVar[CommandPartitionedTopicMetadataResponse.LookupType]
    Success: CommandPartitionedTopicMetadataResponse.LookupType
    Failed: CommandPartitionedTopicMetadataResponse.LookupType
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    partitions: int
    request_id: int
    response: CommandPartitionedTopicMetadataResponse.LookupType
    error: ServerError
    message: str
    def __init__(self, partitions: _Optional[int] = ..., request_id: _Optional[int] = ..., response: _Optional[_Union[CommandPartitionedTopicMetadataResponse.LookupType, str]] = ..., error: _Optional[_Union[ServerError, str]] = ..., message: _Optional[str] = ...) -> None: ...

class CommandLookupTopic(_message.Message):
    __slots__ = ("topic", "request_id", "authoritative", "advertised_listener_name")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    AUTHORITATIVE_FIELD_NUMBER: _ClassVar[int]
    ADVERTISED_LISTENER_NAME_FIELD_NUMBER: _ClassVar[int]
    topic: str
    request_id: int
    authoritative: bool
    advertised_listener_name: str
    def __init__(self, topic: _Optional[str] = ..., request_id: _Optional[int] = ..., authoritative: _Optional[bool] = ..., advertised_listener_name: _Optional[str] = ...) -> None: ...

class CommandLookupTopicResponse(_message.Message):
    __slots__ = ("broker_service_url", "broker_service_url_tls", "response", "request_id", "authoritative", "error", "message", "proxy_through_service_url")
    class LookupType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        Redirect: _ClassVar[CommandLookupTopicResponse.LookupType]
        Connect: _ClassVar[CommandLookupTopicResponse.LookupType]
        Failed: _ClassVar[CommandLookupTopicResponse.LookupType]
    Redirect: CommandLookupTopicResponse.LookupType
    Connect: CommandLookupTopicResponse.LookupType
    Failed: CommandLookupTopicResponse.LookupType
    BROKER_SERVICE_URL_FIELD_NUMBER: _ClassVar[int]
    BROKER_SERVICE_URL_TLS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    AUTHORITATIVE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PROXY_THROUGH_SERVICE_URL_FIELD_NUMBER: _ClassVar[int]
    broker_service_url: str
    broker_service_url_tls: str
    response: CommandLookupTopicResponse.LookupType
    request_id: int
    authoritative: bool
    error: ServerError
    message: str
    proxy_through_service_url: bool
    def __init__(self, broker_service_url: _Optional[str] = ..., broker_service_url_tls: _Optional[str] = ..., response: _Optional[_Union[CommandLookupTopicResponse.LookupType, str]] = ..., request_id: _Optional[int] = ..., authoritative: _Optional[bool] = ..., error: _Optional[_Union[ServerError, str]] = ..., message: _Optional[str] = ..., proxy_through_service_url: _Optional[bool] = ...) -> None: ...

class CommandActiveConsumerChange(_message.Message):
    __slots__ = ("consumer_id", "is_active")
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    IS_ACTIVE_FIELD_NUMBER: _ClassVar[int]
    consumer_id: int
    is_active: bool
    def __init__(self, consumer_id: _Optional[int] = ..., is_active: _Optional[bool] = ...) -> None: ...

class CommandGetTopicsOfNamespace(_message.Message):
    __slots__ = ("request_id", "namespace", "mode", "topics_pattern", "topics_hash")
    class Mode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        PERSISTENT: _ClassVar[CommandGetTopicsOfNamespace.Mode]
        NON_PERSISTENT: _ClassVar[CommandGetTopicsOfNamespace.Mode]
        ALL: _ClassVar[CommandGetTopicsOfNamespace.Mode]
    PERSISTENT: CommandGetTopicsOfNamespace.Mode
    NON_PERSISTENT: CommandGetTopicsOfNamespace.Mode
    ALL: CommandGetTopicsOfNamespace.Mode
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    TOPICS_PATTERN_FIELD_NUMBER: _ClassVar[int]
    TOPICS_HASH_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    namespace: str
    mode: CommandGetTopicsOfNamespace.Mode
    topics_pattern: str
    topics_hash: str
    def __init__(self, request_id: _Optional[int] = ..., namespace: _Optional[str] = ..., mode: _Optional[_Union[CommandGetTopicsOfNamespace.Mode, str]] = ..., topics_pattern: _Optional[str] = ..., topics_hash: _Optional[str] = ...) -> None: ...

class CommandGetTopicsOfNamespaceResponse(_message.Message):
    __slots__ = ("request_id", "topics", "filtered", "topics_hash", "changed")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    FILTERED_FIELD_NUMBER: _ClassVar[int]
    TOPICS_HASH_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    topics: _containers.RepeatedScalarFieldContainer[str]
    filtered: bool
    topics_hash: str
    changed: bool
    def __init__(self, request_id: _Optional[int] = ..., topics: _Optional[_Iterable[str]] = ..., filtered: _Optional[bool] = ..., topics_hash: _Optional[str] = ..., changed: _Optional[bool] = ...) -> None: ...

class CommandGetSchema(_message.Message):
    __slots__ = ("request_id", "topic", "schema_version")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    topic: str
    schema_version: bytes
    def __init__(self, request_id: _Optional[int] = ..., topic: _Optional[str] = ..., schema_version: _Optional[bytes] = ...) -> None: ...

class CommandGetSchemaResponse(_message.Message):
    __slots__ = ("request_id", "error_code", "error_message", "schema", "schema_version")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    error_code: ServerError
    error_message: str
    schema: Schema
    schema_version: bytes
    def __init__(self, request_id: _Optional[int] = ..., error_code: _Optional[_Union[ServerError, str]] = ..., error_message: _Optional[str] = ..., schema: _Optional[_Union[Schema, _Mapping]] = ..., schema_version: _Optional[bytes] = ...) -> None: ...

class CommandGetOrCreateSchema(_message.Message):
    __slots__ = ("request_id", "topic", "schema")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    topic: str
    schema: Schema
    def __init__(self, request_id: _Optional[int] = ..., topic: _Optional[str] = ..., schema: _Optional[_Union[Schema, _Mapping]] = ...) -> None: ...

class CommandGetOrCreateSchemaResponse(_message.Message):
    __slots__ = ("request_id", "error_code", "error_message", "schema_version")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    error_code: ServerError
    error_message: str
    schema_version: bytes
    def __init__(self, request_id: _Optional[int] = ..., error_code: _Optional[_Union[ServerError, str]] = ..., error_message: _Optional[str] = ..., schema_version: _Optional[bytes] = ...) -> None: ...

class BaseCommand(_message.Message):
    __slots__ = ("type", "connect", "connected", "subscribe", "producer", "send", "send_receipt", "send_error", "message", "ack", "flow", "unsubscribe", "success", "error", "close_producer", "close_consumer", "producer_success", "ping", "pong", "redeliver_unacknowledged_messages", "partition_metadata", "partition_metadata_response", "lookup_topic", "lookup_topic_response", "seek", "get_last_message_id", "get_last_message_id_response", "active_consumer_change", "get_topics_of_namespace", "get_topics_of_namespace_response", "get_schema", "get_schema_response", "ack_response", "get_or_create_schema", "get_or_create_schema_response")
    class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        CONNECT: _ClassVar[BaseCommand.Type]
        CONNECTED: _ClassVar[BaseCommand.Type]
        SUBSCRIBE: _ClassVar[BaseCommand.Type]
        PRODUCER: _ClassVar[BaseCommand.Type]
        SEND: _ClassVar[BaseCommand.Type]
        SEND_RECEIPT: _ClassVar[BaseCommand.Type]
        SEND_ERROR: _ClassVar[BaseCommand.Type]
        MESSAGE: _ClassVar[BaseCommand.Type]
        ACK: _ClassVar[BaseCommand.Type]
        FLOW: _ClassVar[BaseCommand.Type]
        UNSUBSCRIBE: _ClassVar[BaseCommand.Type]
        SUCCESS: _ClassVar[BaseCommand.Type]
        ERROR: _ClassVar[BaseCommand.Type]
        CLOSE_PRODUCER: _ClassVar[BaseCommand.Type]
        CLOSE_CONSUMER: _ClassVar[BaseCommand.Type]
        PRODUCER_SUCCESS: _ClassVar[BaseCommand.Type]
        PING: _ClassVar[BaseCommand.Type]
        PONG: _ClassVar[BaseCommand.Type]
        REDELIVER_UNACKNOWLEDGED_MESSAGES: _ClassVar[BaseCommand.Type]
        PARTITIONED_METADATA: _ClassVar[BaseCommand.Type]
        PARTITIONED_METADATA_RESPONSE: _ClassVar[BaseCommand.Type]
        LOOKUP: _ClassVar[BaseCommand.Type]
        LOOKUP_RESPONSE: _ClassVar[BaseCommand.Type]
        CONSUMER_STATS: _ClassVar[BaseCommand.Type]
        CONSUMER_STATS_RESPONSE: _ClassVar[BaseCommand.Type]
        REACHED_END_OF_TOPIC: _ClassVar[BaseCommand.Type]
        SEEK: _ClassVar[BaseCommand.Type]
        GET_LAST_MESSAGE_ID: _ClassVar[BaseCommand.Type]
        GET_LAST_MESSAGE_ID_RESPONSE: _ClassVar[BaseCommand.Type]
        ACTIVE_CONSUMER_CHANGE: _ClassVar[BaseCommand.Type]
        GET_TOPICS_OF_NAMESPACE: _ClassVar[BaseCommand.Type]
        GET_TOPICS_OF_NAMESPACE_RESPONSE: _ClassVar[BaseCommand.Type]
        GET_SCHEMA: _ClassVar[BaseCommand.Type]
        GET_SCHEMA_RESPONSE: _ClassVar[BaseCommand.Type]
        AUTH_CHALLENGE: _ClassVar[BaseCommand.Type]
        AUTH_RESPONSE: _ClassVar[BaseCommand.Type]
        ACK_RESPONSE: _ClassVar[BaseCommand.Type]
        GET_OR_CREATE_SCHEMA: _ClassVar[BaseCommand.Type]
        GET_OR_CREATE_SCHEMA_RESPONSE: _ClassVar[BaseCommand.Type]
    CONNECT: BaseCommand.Type
    CONNECTED: BaseCommand.Type
    SUBSCRIBE: BaseCommand.Type
    PRODUCER: BaseCommand.Type
    SEND: BaseCommand.Type
    SEND_RECEIPT: BaseCommand.Type
    SEND_ERROR: BaseCommand.Type
    MESSAGE: BaseCommand.Type
    ACK: BaseCommand.Type
    FLOW: BaseCommand.Type
    UNSUBSCRIBE: BaseCommand.Type
    SUCCESS: BaseCommand.Type
    ERROR: BaseCommand.Type
    CLOSE_PRODUCER: BaseCommand.Type
    CLOSE_CONSUMER: BaseCommand.Type
    PRODUCER_SUCCESS: BaseCommand.Type
    PING: BaseCommand.Type
    PONG: BaseCommand.Type
    REDELIVER_UNACKNOWLEDGED_MESSAGES: BaseCommand.Type
    PARTITIONED_METADATA: BaseCommand.Type
    PARTITIONED_METADATA_RESPONSE: BaseCommand.Type
    LOOKUP: BaseCommand.Type
    LOOKUP_RESPONSE: BaseCommand.Type
    CONSUMER_STATS: BaseCommand.Type
    CONSUMER_STATS_RESPONSE: BaseCommand.Type
    REACHED_END_OF_TOPIC: BaseCommand.Type
    SEEK: BaseCommand.Type
    GET_LAST_MESSAGE_ID: BaseCommand.Type
    GET_LAST_MESSAGE_ID_RESPONSE: BaseCommand.Type
    ACTIVE_CONSUMER_CHANGE: BaseCommand.Type
    GET_TOPICS_OF_NAMESPACE: BaseCommand.Type
    GET_TOPICS_OF_NAMESPACE_RESPONSE: BaseCommand.Type
    GET_SCHEMA: BaseCommand.Type
    GET_SCHEMA_RESPONSE: BaseCommand.Type
    AUTH_CHALLENGE: BaseCommand.Type
    AUTH_RESPONSE: BaseCommand.Type
    ACK_RESPONSE: BaseCommand.Type
    GET_OR_CREATE_SCHEMA: BaseCommand.Type
    GET_OR_CREATE_SCHEMA_RESPONSE: BaseCommand.Type
    TYPE_FIELD_NUMBER: _ClassVar[int]
    CONNECT_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBE_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_FIELD_NUMBER: _ClassVar[int]
    SEND_FIELD_NUMBER: _ClassVar[int]
    SEND_RECEIPT_FIELD_NUMBER: _ClassVar[int]
    SEND_ERROR_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    FLOW_FIELD_NUMBER: _ClassVar[int]
    UNSUBSCRIBE_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CLOSE_PRODUCER_FIELD_NUMBER: _ClassVar[int]
    CLOSE_CONSUMER_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_SUCCESS_FIELD_NUMBER: _ClassVar[int]
    PING_FIELD_NUMBER: _ClassVar[int]
    PONG_FIELD_NUMBER: _ClassVar[int]
    REDELIVER_UNACKNOWLEDGED_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    PARTITION_METADATA_FIELD_NUMBER: _ClassVar[int]
    PARTITION_METADATA_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    LOOKUP_TOPIC_FIELD_NUMBER: _ClassVar[int]
    LOOKUP_TOPIC_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    SEEK_FIELD_NUMBER: _ClassVar[int]
    GET_LAST_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    GET_LAST_MESSAGE_ID_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_CONSUMER_CHANGE_FIELD_NUMBER: _ClassVar[int]
    GET_TOPICS_OF_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    GET_TOPICS_OF_NAMESPACE_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    GET_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    GET_SCHEMA_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    ACK_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    GET_OR_CREATE_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    GET_OR_CREATE_SCHEMA_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    type: BaseCommand.Type
    connect: CommandConnect
    connected: CommandConnected
    subscribe: CommandSubscribe
    producer: CommandProducer
    send: CommandSend
    send_receipt: CommandSendReceipt
    send_error: CommandSendError
    message: CommandMessage
    ack: CommandAck
    flow: CommandFlow
    unsubscribe: CommandUnsubscribe
    success: CommandSuccess
    error: CommandError
    close_producer: CommandCloseProducer
    close_consumer: CommandCloseConsumer
    producer_success: CommandProducerSuccess
    ping: CommandPing
    pong: CommandPong
    redeliver_unacknowledged_messages: CommandRedeliverUnacknowledgedMessages
    partition_metadata: CommandPartitionedTopicMetadata
    partition_metadata_response: CommandPartitionedTopicMetadataResponse
    lookup_topic: CommandLookupTopic
    lookup_topic_response: CommandLookupTopicResponse
    seek: CommandSeek
    get_last_message_id: CommandGetLastMessageId
    get_last_message_id_response: CommandGetLastMessageIdResponse
    active_consumer_change: CommandActiveConsumerChange
    get_topics_of_namespace: CommandGetTopicsOfNamespace
    get_topics_of_namespace_response: CommandGetTopicsOfNamespaceResponse
    get_schema: CommandGetSchema
    get_schema_response: CommandGetSchemaResponse
    ack_response: CommandAckResponse
    get_or_create_schema: CommandGetOrCreateSchema
    get_or_create_schema_response: CommandGetOrCreateSchemaResponse
    def __init__(self, type: _Optional[_Union[BaseCommand.Type, str]] = ..., connect: _Optional[_Union[CommandConnect, _Mapping]] = ..., connected: _Optional[_Union[CommandConnected, _Mapping]] = ..., subscribe: _Optional[_Union[CommandSubscribe, _Mapping]] = ..., producer: _Optional[_Union[CommandProducer, _Mapping]] = ..., send: _Optional[_Union[CommandSend, _Mapping]] = ..., send_receipt: _Optional[_Union[CommandSendReceipt, _Mapping]] = ..., send_error: _Optional[_Union[CommandSendError, _Mapping]] = ..., message: _Optional[_Union[CommandMessage, _Mapping]] = ..., ack: _Optional[_Union[CommandAck, _Mapping]] = ..., flow: _Optional[_Union[CommandFlow, _Mapping]] = ..., unsubscribe: _Optional[_Union[CommandUnsubscribe, _Mapping]] = ..., success: _Optional[_Union[CommandSuccess, _Mapping]] = ..., error: _Optional[_Union[CommandError, _Mapping]] = ..., close_producer: _Optional[_Union[CommandCloseProducer, _Mapping]] = ..., close_consumer: _Optional[_Union[CommandCloseConsumer, _Mapping]] = ..., producer_success: _Optional[_Union[CommandProducerSuccess, _Mapping]] = ..., ping: _Optional[_Union[CommandPing, _Mapping]] = ..., pong: _Optional[_Union[CommandPong, _Mapping]] = ..., redeliver_unacknowledged_messages: _Optional[_Union[CommandRedeliverUnacknowledgedMessages, _Mapping]] = ..., partition_metadata: _Optional[_Union[CommandPartitionedTopicMetadata, _Mapping]] = ..., partition_metadata_response: _Optional[_Union[CommandPartitionedTopicMetadataResponse, _Mapping]] = ..., lookup_topic: _Optional[_Union[CommandLookupTopic, _Mapping]] = ..., lookup_topic_response: _Optional[_Union[CommandLookupTopicResponse, _Mapping]] = ..., seek: _Optional[_Union[CommandSeek, _Mapping]] = ..., get_last_message_id: _Optional[_Union[CommandGetLastMessageId, _Mapping]] = ..., get_last_message_id_response: _Optional[_Union[CommandGetLastMessageIdResponse, _Mapping]] = ..., active_consumer_change: _Optional[_Union[CommandActiveConsumerChange, _Mapping]] = ..., get_topics_of_namespace: _Optional[_Union[CommandGetTopicsOfNamespace, _Mapping]] = ..., get_topics_of_namespace_response: _Optional[_Union[CommandGetTopicsOfNamespaceResponse, _Mapping]] = ..., get_schema: _Optional[_Union[CommandGetSchema, _Mapping]] = ..., get_schema_response: _Optional[_Union[CommandGetSchemaResponse, _Mapping]] = ..., ack_response: _Optional[_Union[CommandAckResponse, _Mapping]] = ..., get_or_create_schema: _Optional[_Union[CommandGetOrCreateSchema, _Mapping]] = ..., get_or_create_schema_response: _Optional[_Union[CommandGetOrCreateSchemaResponse, _Mapping]] = ...) -> None: ...
