"""Frames of Pulsar's binary protocol (big-endian throughout).

    simple command:  [u32 total][u32 command size][BaseCommand]
    payload command: [u32 total][u32 command size][BaseCommand][u16 0x0e01][u32 CRC32C]
                     [u32 metadata size][MessageMetadata][payload]

`total` counts every byte after itself. The CRC32C (Castagnoli) covers everything from the metadata size to
the end of the payload; the 0x0e01 block is optional (clients below protocol version 6 leave it out).
`FrameDecoder` cuts a byte stream into frames; nothing here does I/O."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, cast

from google.protobuf.message import DecodeError

from seglog._core._format import crc32c
from seglog._core._pulsar_send import SendFrame, cut_sends
from seglog._core._pulsar_wire import (
    AckCommand,
    FlowCommand,
    consumer_commands,
    payload_frame,
    send_command,
    send_receipts,
)
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.message_ids import UINT64_MINUS_ONE

MAGIC_CRC32C = 0x0E01
MAGIC_BROKER_ENTRY_METADATA = 0x0E02
MAX_FRAME_SIZE = 5 * 1024 * 1024  # Pulsar's default frame limit (maxMessageSize); clients adopt max_message_size
FRAME_PADDING = 10 * 1024  # room for the command and metadata around a payload of the largest message

_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
_HEAD = struct.Struct(">II")


class _CommandTypes:
    """BaseCommand.Type's values as plain attributes (Type.SEND), and its Name(): protobuf's enum wrapper
    looks each name up in Python, about 1 µs, and a server looks up several for every message it handles."""
    Name = staticmethod(api.BaseCommand.Type.Name)


for _value in api.BaseCommand.Type.DESCRIPTOR.values:
    setattr(_CommandTypes, _value.name, _value.number)
Type: Any = _CommandTypes


class FrameError(Exception):
    """Bytes that are no frame. `fatal`: the stream cannot be followed any further (a bad size), so the
    connection must close; otherwise the frame was cut out whole and the next one can be read."""

    def __init__(self, message: str, *, fatal: bool) -> None:
        super().__init__(message)
        self.fatal = fatal


@dataclass
class Frame:
    """One decoded frame: its command and, for SEND (and MESSAGE), the raw metadata and payload."""

    command: api.BaseCommand
    metadata: bytes | None = None  # MessageMetadata, still serialized (parsed by whoever needs it)
    payload: bytes | None = None
    checksum_ok: bool = True  # False: the 0x0e01 block was present and its CRC32C did not match


@dataclass
class SendReceipts:
    """Consecutive SEND_RECEIPT frames, read natively: (producer_id, sequence_id) of each, in order."""

    receipts: list[tuple[int, int]]


class FrameDecoder:
    """Feed bytes as they arrive; `feed()` returns each whole frame received so far."""

    def __init__(self, max_frame_size: int = MAX_FRAME_SIZE + FRAME_PADDING) -> None:
        self.max_frame_size = max_frame_size
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Frame | FrameError]:
        """The frames completed by `data`, in order; a frame that does not decode is a FrameError in the list
        (a fatal one ends it: nothing after it can be cut out)."""
        return cast(list[Frame | FrameError], self._cut(data))

    def feed_with_receipts(self, data: bytes) -> list[Frame | FrameError | SendReceipts]:
        """As feed, but runs of SEND_RECEIPT frames come as SendReceipts: a producer with many messages in
        flight (a replicator) reads one a message, and decoding each as a BaseCommand was most of what its
        receipts cost it."""
        return cast(list[Frame | FrameError | SendReceipts], self._cut(data, receipts=True))

    def feed_with_sends(self, data: bytes) -> list[Frame | FrameError | SendFrame | FlowCommand | AckCommand]:
        """As feed, but what a server reads all along is read natively, without a protobuf object: SENDs of
        the ordinary kind come as SendFrames (_core/_pulsar_send.pyx), one for every entry produced, and a
        consumer's plain FLOWs and ACKs as FlowCommands and AckCommands (_pulsar_wire.consumer_commands)."""
        return cast(list[Frame | FrameError | SendFrame | FlowCommand | AckCommand], self._cut(data, sends=True))

    def _cut(self, data: bytes, *, receipts: bool = False,
             sends: bool = False) -> list[Frame | FrameError | SendReceipts | SendFrame | FlowCommand | AckCommand]:
        self._buffer += data
        out: list[Frame | FrameError | SendReceipts | SendFrame | FlowCommand | AckCommand] = []
        buffer = self._buffer
        position = 0
        while len(buffer) - position >= 4:
            if receipts:
                run, position = send_receipts(buffer, position)
                if run:
                    out.append(SendReceipts(run))
                    continue
            if sends:
                cut, position = cut_sends(buffer, position, self.max_frame_size)
                if cut:
                    out += cut
                    continue
                commands, position = consumer_commands(buffer, position)
                if commands:
                    out += commands
                    continue
            (total,) = _U32.unpack_from(buffer, position)
            if total < 4 or total > self.max_frame_size:
                out.append(FrameError(f"frame size {total} is outside 4 .. {self.max_frame_size} bytes", fatal=True))
                del buffer[:]
                return out
            if len(buffer) - position - 4 < total:
                break
            body = bytes(buffer[position + 4:position + 4 + total])
            position += 4 + total
            try:
                out.append(decode_frame(body))
            except FrameError as error:
                out.append(error)
        del buffer[:position]
        return out


def send_of(frame: Frame) -> SendFrame:
    """A SEND that FrameDecoder decoded (one with fields cut_sends leaves to it), as a SendFrame."""
    send = frame.command.send
    return SendFrame(send.producer_id, send.sequence_id, send.highest_sequence_id, send.num_messages,
                     frame.checksum_ok, frame.metadata or b"", frame.payload or b"")


def frame_of(read: FlowCommand | AckCommand) -> Frame:
    """A Frame with the field values protobuf's decoding gives for a FLOW or ACK that consumer_commands read
    (not an id's batch_size, which it skips, nor whether a default was sent)."""
    if isinstance(read, FlowCommand):
        return Frame(command(Type.FLOW, consumer_id=read.consumer_id, message_permits=read.message_permits))
    ids = []
    for acked in read.message_id:
        mid = api.MessageIdData(ledger_id=acked.ledger_id, entry_id=acked.entry_id, ack_set=acked.ack_set)
        if acked.partition != -1:  # (-1, the default, left unset)
            mid.partition = acked.partition
        if acked.batch_index != -1:
            mid.batch_index = acked.batch_index
        ids.append(mid)
    return Frame(command(Type.ACK, consumer_id=read.consumer_id, ack_type=read.ack_type, message_id=ids,
                         request_id=read.request_id))


def decode_frame(body: bytes) -> Frame:
    """A frame's bytes after its total size."""
    (command_size,) = _U32.unpack_from(body, 0)
    if command_size > len(body) - 4:
        raise FrameError(f"command size {command_size} is beyond the frame's {len(body) - 4} bytes", fatal=False)
    command = api.BaseCommand()
    try:
        command.ParseFromString(body[4:4 + command_size])
    except DecodeError as error:
        raise FrameError(f"the command does not parse: {error}", fatal=False) from None
    rest = memoryview(body)[4 + command_size:]
    if not rest:
        return Frame(command)
    checksum_ok = True
    if len(rest) >= 2 and _U16.unpack_from(rest, 0)[0] == MAGIC_BROKER_ENTRY_METADATA:
        (size,) = _U32.unpack_from(rest, 2) if len(rest) >= 6 else (len(rest),)
        rest = rest[6 + size:]
    if len(rest) >= 6 and _U16.unpack_from(rest, 0)[0] == MAGIC_CRC32C:
        (expected,) = _U32.unpack_from(rest, 2)
        rest = rest[6:]
        checksum_ok = crc32c(rest) == expected
    if len(rest) < 4:
        raise FrameError("the payload command has no metadata size", fatal=False)
    (metadata_size,) = _U32.unpack_from(rest, 0)
    if metadata_size > len(rest) - 4:
        raise FrameError(f"metadata size {metadata_size} is beyond the frame", fatal=False)
    return Frame(command, bytes(rest[4:4 + metadata_size]), bytes(rest[4 + metadata_size:]), checksum_ok)


def encode_command(command: api.BaseCommand) -> bytes:
    data = command.SerializeToString()
    return _HEAD.pack(len(data) + 4, len(data)) + data


def encode_payload_command(command: api.BaseCommand, metadata: bytes, payload: bytes) -> bytes:
    """A payload command with the CRC32C block, as clients at protocol version 6 and above write it."""
    return payload_frame(command.SerializeToString(), metadata, payload)


def encode_send(producer_id: int, sequence_id: int, num_messages: int, metadata: bytes, payload: bytes) -> bytes:
    """A SEND of `num_messages` messages (its CommandSend has only these fields), with the CRC32C block."""
    return payload_frame(send_command(producer_id, sequence_id, num_messages), metadata, payload)


NO_REQUEST = UINT64_MINUS_ONE  # the request id of a command the server starts (-1, as Java's broker sends)


def command(kind: int, **fields: object) -> api.BaseCommand:
    """A BaseCommand of type `kind` with its sub-command's fields set, e.g. command(Type.PONG)."""
    base = api.BaseCommand(type=kind)  # type: ignore[arg-type]
    field = _FIELD_OF_TYPE[kind]
    sub = getattr(base, field)
    sub.SetInParent()
    for name, value in fields.items():
        if isinstance(value, api.MessageIdData):
            getattr(sub, name).CopyFrom(value)
        elif isinstance(value, list):  # a repeated field
            getattr(sub, name).extend(value)
        elif value is not None:
            setattr(sub, name, value)
    return base


# the sub-command field of each command type this module's encoder may be asked for
_FIELD_OF_TYPE = {field.number: field.name for field in api.BaseCommand.DESCRIPTOR.fields if field.number != 1}


def sub_command(base: api.BaseCommand) -> object | None:
    """The sub-command a BaseCommand carries for its type, or None when seglog's .proto has no field for it."""
    field = _FIELD_OF_TYPE.get(base.type)
    return None if field is None or not base.HasField(field) else getattr(base, field)
