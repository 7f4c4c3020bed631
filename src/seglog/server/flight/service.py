"""The Flight port's methods: DoGet streams a range of a partition's stored batches (ticket.py), to a role
allowed to consume the topic, within the port's bounds (streams.py); DoPut stages a task attempt's rows and the
actions "publish" and "abort" publish or drop a write's (writes.py), for a role allowed to produce to the topic.
Every other Flight method is pyarrow's default: not implemented."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pyarrow as pa
from pyarrow import flight

from seglog._core._arrow import SCHEMA
from seglog.broker import Broker
from seglog.errors import InvalidArgumentError, TopicNotFoundError
from seglog.server import auth
from seglog.server.errors import ServerFailure
from seglog.server.flight.authentication import MIDDLEWARE, Authentication, principal_of
from seglog.server.flight.errors import flight_error
from seglog.server.flight.streams import StreamSlots, wire_batches
from seglog.server.flight.ticket import RangeTicket, parse_ticket
from seglog.server.flight.writes import FlightWrites
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.storage.range_read import VERSION_COLUMN, read_range

SCHEMA_WITH_VERSIONS = SCHEMA.append(pa.field(VERSION_COLUMN, pa.int64()))


class FlightService(flight.FlightServerBase):
    """seglog's Flight methods over the broker, serving at `location` as soon as it is made (pyarrow's
    server: gRPC's threads call the methods)."""

    def __init__(self, broker: Broker, authority: auth.Authority, location: str, *,
                 tls_certificates: list[tuple[str, str]] | None = None, verify_client: bool = False,
                 root_certificates: str | None = None, slots: StreamSlots | None = None,
                 writes: FlightWrites | None = None) -> None:
        super().__init__(location, tls_certificates=tls_certificates, verify_client=verify_client,
                         root_certificates=root_certificates, middleware={MIDDLEWARE: Authentication(authority)})
        self._broker = broker
        self._authority = authority
        self.slots = slots or StreamSlots()
        self._writes = writes  # None: a port that serves reads only

    def do_get(self, context: flight.ServerCallContext, ticket: flight.Ticket) -> flight.GeneratorStream:
        try:
            wanted = parse_ticket(ticket.ticket)
            self._authorize(context, wanted)
            self._check_partition(wanted)
        except ServerFailure as failure:
            raise _refused(failure) from None
        except Exception as error:
            raise flight_error(error) from None
        schema = SCHEMA_WITH_VERSIONS if wanted.schema_versions else SCHEMA
        return flight.GeneratorStream(schema, self._stream(wanted))

    def do_put(self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor,
               reader: flight.MetadataRecordBatchReader, writer: flight.FlightMetadataWriter) -> None:
        """Stage one task attempt's rows, batch by batch, within the port's stream slots (writes.py)."""
        writes = self._writes_served()
        try:
            put = writes.check_put(principal_of(context), descriptor.command or b"")
            rows = (chunk.data for chunk in reader if chunk.data is not None)  # (None: a chunk of metadata alone)
            writes.put(put, reader.schema, self.slots.admitted(rows))
        except ServerFailure as failure:
            raise _refused(failure) from None
        except Exception as error:
            raise flight_error(error) from None

    def do_action(self, context: flight.ServerCallContext, action: flight.Action) -> Iterator[bytes]:
        """"publish" (its one result: JSON {"published": true or false}) or "abort" (no result) of a write."""
        writes = self._writes_served()
        body = action.body.to_pybytes()
        try:
            if action.type == "publish":
                published = writes.publish(principal_of(context), body)
                return iter([json.dumps({"published": published}).encode()])
            if action.type == "abort":
                writes.abort(principal_of(context), body)
                return iter([])
            raise InvalidArgumentError("action", action.type, "'publish' or 'abort'")
        except ServerFailure as failure:
            raise _refused(failure) from None
        except Exception as error:
            raise flight_error(error) from None

    def _writes_served(self) -> FlightWrites:
        if self._writes is None:
            raise NotImplementedError("this Flight port serves reads only (DoGet)")  # (gRPC's UNIMPLEMENTED)
        return self._writes

    def _authorize(self, context: flight.ServerCallContext, wanted: RangeTicket) -> None:
        """Refuse a role without the `consume` action on the topic (ServerFailure AuthorizationError)."""
        self._authority.authorize_topic(principal_of(context), str(wanted.topic), auth.CONSUME,
                                        f"consume topic {wanted.topic}")

    def _check_partition(self, wanted: RangeTicket) -> None:
        """TopicNotFoundError naming the topic, or the partition it lacks."""
        partitions = self._broker.topic(wanted.topic).partitions
        if wanted.partition >= partitions:
            raise TopicNotFoundError(f"topic {wanted.topic} has no partition {wanted.partition}: its partitions "
                                     f"are 0 to {partitions - 1}")

    def _stream(self, wanted: RangeTicket) -> Iterator[pa.RecordBatch]:
        """The range's batches, cut to the wire's bounds, once the stream has a slot; seglog's errors while
        reading as flight_error says."""
        batches = read_range(self._broker.store, wanted.topic, wanted.partition, wanted.start, wanted.end,
                             verify_crc=self._broker.config.verify_crc, read_compacted=wanted.read_compacted,
                             fail_on_data_loss=wanted.fail_on_data_loss, max_horizon=wanted.max_horizon,
                             schema_versions=wanted.schema_versions)
        try:
            yield from self.slots.admitted(wire_batches(batches))
        except Exception as error:
            raise flight_error(error) from None


def _refused(failure: ServerFailure) -> flight.FlightError:
    """What authorize_topic refused: an AuthorizationError as FlightUnauthorizedError, an AuthenticationError (a
    token that expired since the call began) as FlightUnauthenticatedError."""
    if failure.code == api.AuthorizationError:
        return flight.FlightUnauthorizedError(str(failure))
    return flight.FlightUnauthenticatedError(str(failure))
