"""seglog's errors as the Flight port answers them, and how a client reads them back.

A seglog error (a bad ticket, an unknown topic or partition, data lost under the range) reaches the client as
a FlightServerError whose message is the error's class name, ': ', then its message:

    OffsetOutOfRangeError: orders partition 0: offsets 0 to 9 were deleted ...

pyarrow's client appends its own context to the message (". Detail: Failed. gRPC client debug context: ...");
seglog.errors.parse_error_message takes the class name and seglog's message back out of that text, so a client
(the Spark connector) raises the same class of seglog.errors with the same message; both functions live there so
that a client need not import the server. Any other exception is a
fault of the server: logged with its traceback, answered as FlightInternalError without what failed (as the
HTTP port answers 500), since pyarrow would otherwise send the server's traceback to the client."""

from __future__ import annotations

import logging

from pyarrow import flight

from seglog.errors import SeglogError, error_message

logger = logging.getLogger("seglog.server")

INTERNAL_ERROR = "the server failed to answer this request (an internal error, logged by the server)"


def flight_error(error: Exception) -> flight.FlightError:
    """The Flight error to raise for `error` in a Flight method (its FlightError as it is)."""
    if isinstance(error, flight.FlightError):
        return error
    if isinstance(error, SeglogError):
        return flight.FlightServerError(error_message(error))
    logger.error("a Flight request failed", exc_info=error)
    return flight.FlightInternalError(INTERNAL_ERROR)
