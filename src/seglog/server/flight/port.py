"""The Flight port's life in `seglog serve`: listening (plain gRPC, or TLS with the server's certificate),
and stopping within a bound.

TLS: with a certificate and key, the port serves TLS only (`grpc+tls://`). Client certificates: pyarrow's
server either requires a certificate the trusted CAs sign (its verify_client, seglog's
--tls-require-trusted-client-cert) or asks for none; it has no "verify when presented". So with
--tls-trust-certs-file alone the Flight port asks for no certificate, and clients authenticate with a token or
a password (a certificate is never a Flight role: authentication.py)."""

from __future__ import annotations

import logging
import socket
import threading
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from seglog.broker import Broker
from seglog.server.auth import Authority
from seglog.server.flight.service import FlightService
from seglog.server.flight.writes import FlightWrites

logger = logging.getLogger("seglog.server")

DEFAULT_PORT = 8815  # Arrow Flight's customary port


@dataclass(frozen=True)
class FlightTls:
    """The server's certificate (PEM chain) and key, and whether clients must present a certificate the CAs
    of `trust_file` sign."""

    cert_file: Path
    key_file: Path
    trust_file: Path | None = None
    require_client_cert: bool = False


class FlightPort:
    """A FlightService listening on `host`:`port` (0: a free port), serving as soon as it is made (writes too
    with `writes`).
    OSError when the port cannot be bound, with the operating system's reason."""

    def __init__(self, broker: Broker, authority: Authority, host: str, port: int, tls: FlightTls | None, *,
                 writes: FlightWrites | None = None) -> None:
        self.tls = tls is not None
        scheme = "grpc+tls" if tls is not None else "grpc"
        certificates, trusted = None, None  # trusted: the CAs a client's certificate must be signed by
        if tls is not None:
            certificates = [(tls.cert_file.read_text(), tls.key_file.read_text())]
            if tls.require_client_cert and tls.trust_file is not None:
                trusted = tls.trust_file.read_text()
        # gRPC says only that the server did not start (and logs why on stderr): a socket bound there first, as
        # gRPC binds (SO_REUSEADDR), says why in one line
        refused = _bind_error(host, port) if port else None
        if refused is not None:
            raise refused
        try:
            self.service = FlightService(broker, authority, f"{scheme}://{_uri_host(host)}:{port}",
                                         tls_certificates=certificates, verify_client=trusted is not None,
                                         root_certificates=trusted, writes=writes)
        except pa.ArrowException:  # (the port taken meanwhile, or a failure of gRPC's: it logged why)
            raise _bind_error(host, port) or OSError(0, f"gRPC could not listen on {host}:{port}") from None
        self.port: int = self.service.port

    def stop(self, timeout_s: float) -> bool:
        """Stop: no new streams, the streams reading end at their next batch, then gRPC's server shuts down.
        Waits up to `timeout_s` (a client that stopped reading holds its write until it goes); whether it
        stopped within it."""
        self.service.slots.close()
        stopping = threading.Thread(target=self.service.shutdown, name="seglog-flight-stop", daemon=True)
        stopping.start()
        stopping.join(timeout_s)
        if stopping.is_alive():
            logger.error("the Flight port did not stop within %.0f s: a client holds a stream without reading it",
                         timeout_s)
            return False
        return True


def _uri_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _bind_error(host: str, port: int) -> OSError | None:
    """The error of binding a socket to host:port; None when it binds."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            return error
    return None
