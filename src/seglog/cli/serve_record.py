"""What a running `seglog serve` records in its data directory, so that a command refused by the writer lock
of a partition the server writes can say so and name the server's URLs instead of a bare process id.

`serve.json` holds the server's pid and the URLs it listens on; serve.py writes it once every port listens
and removes it when the server stops. A server killed with SIGKILL leaves it behind: it is only believed when
its pid is the one that holds the lock in question (the kernel frees a dead process's locks)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

RECORD_FILE = "serve.json"


@dataclass(frozen=True)
class ServerRecord:
    pid: int
    urls: tuple[str, ...]  # pulsar://, http://, then the TLS ones and grpc://, as the server's first line prints them

    @property
    def broker_url(self) -> str:
        """The URL producers connect to: the binary protocol's (pulsar:// or pulsar+ssl://)."""
        return next((url for url in self.urls if url.startswith("pulsar")), self.urls[0])


def write_record(data: Path, urls: tuple[str, ...]) -> Path:
    """Record this process as the server of the data directory `data`, listening on `urls`; the file's path.
    Written to a temporary file and renamed, so a reader never sees half of it."""
    path = data / RECORD_FILE
    partial = path.with_name(f".{RECORD_FILE}.{os.getpid()}")
    partial.write_text(json.dumps({"pid": os.getpid(), "urls": list(urls)}))
    partial.replace(path)
    return path


def recorded_server(data: Path) -> ServerRecord | None:
    """The server recorded in the data directory `data`, if one is (unreadable or malformed: None)."""
    try:
        document = json.loads((data / RECORD_FILE).read_text())
        record = ServerRecord(int(document["pid"]), tuple(str(url) for url in document["urls"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return record if record.urls else None
