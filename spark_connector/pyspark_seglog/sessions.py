"""Where a query's topics are, and a session with them: a data directory this machine sees (the `path`
option), or a `seglog serve` (the `serviceUrl` option), whose admin REST API the driver plans with and whose
Arrow Flight port the executors read from.

Both sessions answer the same two things: `admin`, seglog.admin's API (in-process, or seglog.remote's client of
the server's REST API, with the same methods and errors), and `read(piece)`, the stored batches of an offset
range (Topic.read_range in-process, a Flight DoGet of the same range on the server, which runs the same
read_range). So planning, decoding and the checks on the rows are one implementation for both."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

# The seglog errors a read through the Flight port raises as they are raised in-process (the server names them)
_FLIGHT_ERRORS = ("OffsetOutOfRangeError", "TopicNotFoundError", "NotFoundError", "SeglogError")


@dataclass(frozen=True)
class Location:
    """A data directory (`path`) or a server (`service_url`, with the token and CA file the options gave), as
    the options name it; `flight_uri` is the server's Flight port, found by the driver (resolved())."""
    path: str | None = None
    service_url: str | None = None
    auth_token: str | None = None
    trust_file: str | None = None
    flight_uri: str | None = None

    @property
    def remote(self) -> bool:
        return self.service_url is not None

    def resolved(self) -> Location:
        """This location with its Flight URI, asked of the server once (executors then need no REST call)."""
        if not self.remote or self.flight_uri is not None:
            return self
        from dataclasses import replace
        from urllib.parse import urlsplit

        assert self.service_url is not None
        with _remote_admin(self) as admin:
            port = admin.flight()
        host = urlsplit(self.service_url).hostname
        return replace(self, flight_uri=f"{'grpc+tls' if port['tls'] else 'grpc'}://{host}:{port['port']}")


@contextmanager
def open_log(path: str) -> Iterator[Any]:
    """An existing data directory, opened without the housekeeping thread: Spark's processes persist no
    cursors between calls, and deleting segments is left to the process that writes them."""
    import seglog
    from seglog.errors import InvalidArgumentError
    if not seglog.is_data_directory(path):
        raise InvalidArgumentError("path", path, "an existing seglog data directory")
    with seglog.open(path, background=False) as log:
        yield log


@contextmanager
def connect(location: Location) -> Iterator[LocalSession | RemoteSession]:
    """A session with the location's topics, closed on leaving."""
    if location.remote:
        with _remote_admin(location) as admin:
            yield RemoteSession(location, admin)
    else:
        assert location.path is not None
        with open_log(location.path) as log:
            yield LocalSession(log)


class LocalSession:
    """A data directory opened in this process."""

    def __init__(self, log: Any) -> None:
        self.log = log
        self.admin = log.admin

    def read(self, topic: str, partition: int, start: int, end: int, **how: Any) -> Iterator[pa.RecordBatch]:
        """Topic.read_range's batches; `how`: its keyword arguments."""
        return self.log.topic(topic).read_range(partition, start, end, **how)


class RemoteSession:
    """A `seglog serve`: its admin REST API, and its Flight port for the rows."""

    def __init__(self, location: Location, admin: Any) -> None:
        self.location = location
        self.admin = admin

    def read(self, topic: str, partition: int, start: int, end: int, **how: Any) -> Iterator[pa.RecordBatch]:
        """The same batches as Topic.read_range's, streamed by the server's Flight port (a DoGet of the range)."""
        from pyarrow import flight
        location = self.location.resolved()
        ticket = flight.Ticket(json.dumps({"topic": topic, "partition": partition, "start": start, "end": end,
                                           **how}).encode())
        with flight_client(location, "consume") as (client, options):
            yield from client.do_get(ticket, options).to_reader()


@contextmanager
def _remote_admin(location: Location) -> Iterator[Any]:
    from seglog.remote import Credentials, RemoteAdmin
    assert location.service_url is not None
    credentials = Credentials(location.auth_token, location.trust_file,
                              how_to_give_token=".option('authToken', TOKEN)",
                              trust_file_given_as="the option tlsTrustCertsFilePath")
    admin = RemoteAdmin(location.service_url, credentials, argument="serviceUrl")
    try:
        yield admin
    finally:
        admin.close()


def _trusted(location: Location) -> str | None:
    """The PEM CA certificates of tlsTrustCertsFilePath (None: the system's)."""
    if location.trust_file is None:
        return None
    with open(location.trust_file) as file:
        return file.read()


def _call_options(location: Location) -> Any:
    from pyarrow import flight
    token = location.auth_token
    headers = [(b"authorization", f"Bearer {token.strip()}".encode())] if token else []
    # pyarrow takes the headers as bytes (its stubs say str, which it refuses)
    return flight.FlightCallOptions(headers=headers)  # type: ignore[arg-type]


def _seglog_error(error: Exception, location: Location, action: str) -> Exception:
    """A Flight error as the exception an in-process call raises (the server names its class), or as a refusal
    naming the option that gives the credential (`action`: what the role must be allowed to do)."""
    from pyarrow import flight

    from seglog import errors
    text = str(error)
    if isinstance(error, flight.FlightUnauthenticatedError):
        return errors.SeglogError(f"the server at {location.service_url} needs a token ({text}): give one with "
                                  ".option('authToken', TOKEN)")
    if isinstance(error, flight.FlightUnauthorizedError):
        return errors.SeglogError(f"the server at {location.service_url} refused this token's role ({text}): give "
                                  f"a token of a role allowed to {action} with .option('authToken', TOKEN)")
    named = errors.parse_error_message(text)
    if named is not None and named[0] in _FLIGHT_ERRORS:
        return getattr(errors, named[0])(named[1])
    doing = "reading from" if action == "consume" else "writing to"
    return errors.SeglogError(f"{doing} the server's Flight port {location.flight_uri} failed: {text}")


@contextmanager
def flight_client(location: Location, action: str) -> Iterator[tuple[Any, Any]]:
    """A client of the server's Flight port (`location` resolved()) and the call options carrying the token; a
    Flight error raised in the block is raised as _seglog_error says (`action`: 'consume' or 'produce', what the
    calls need the role to be allowed to do)."""
    from pyarrow import flight
    assert location.flight_uri is not None
    client = flight.FlightClient(location.flight_uri, tls_root_certs=_trusted(location))
    try:
        yield client, _call_options(location)
    except flight.FlightError as error:
        raise _seglog_error(error, location, action) from None
    finally:
        client.close()
