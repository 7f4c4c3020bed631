"""seglog's errors as the Flight port answers them, and how a client reads them back.

A seglog error (a bad ticket, an unknown topic or partition, data lost under the range) reaches the client as
a FlightServerError whose message is the error's class name, ': ', then its message:

    OffsetOutOfRangeError: orders partition 0: offsets 0 to 9 were deleted ...

pyarrow's client appends its own context to the message (". Detail: Failed. gRPC client debug context: ...");
`parse_error_message` takes the class name and seglog's message back out of that text, so a client (the Spark
connector mirrors it) raises the same class of seglog.errors with the same message. Any other exception is a
fault of the server: logged with its traceback, answered as FlightInternalError without what failed (as the
HTTP port answers 500), since pyarrow would otherwise send the server's traceback to the client."""

from __future__ import annotations

import logging
import re

from pyarrow import flight

from seglog.errors import SeglogError

logger = logging.getLogger("seglog.server")

INTERNAL_ERROR = "the server failed to answer this request (an internal error, logged by the server)"
# the class name of a seglog error at the start of a message, then its own message up to pyarrow's context
_SEGLOG_ERROR = re.compile(r"(?P<error>[A-Z][A-Za-z]*Error): (?P<message>.*?)(?:\. Detail: .*)?", re.DOTALL)


def error_message(error: SeglogError) -> str:
    """The message the client gets for `error`: 'ClassName: message'."""
    return f"{type(error).__name__}: {error}"


def parse_error_message(text: str) -> tuple[str, str] | None:
    """(class name, message) of a seglog error as the Flight client reports it (error_message's text, with
    pyarrow's context after it); None for a message that is not one."""
    match = _SEGLOG_ERROR.fullmatch(text)
    return None if match is None else (match["error"], match["message"])


def flight_error(error: Exception) -> flight.FlightError:
    """The Flight error to raise for `error` in a Flight method (its FlightError as it is)."""
    if isinstance(error, flight.FlightError):
        return error
    if isinstance(error, SeglogError):
        return flight.FlightServerError(error_message(error))
    logger.error("a Flight request failed", exc_info=error)
    return flight.FlightInternalError(INTERNAL_ERROR)
