"""Tenants, namespaces and topics of a data directory, in SQLite (`meta.sqlite`, WAL mode).

SQLite gives atomic, crash-safe updates and safe access from several processes; the tables are tiny.
`public/default` always exists; creating a topic creates its tenant and namespace if needed."""

from __future__ import annotations

import json
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seglog.errors import TopicExistsError, TopicNotFoundError
from seglog.names import TopicName

SCHEMA = """
CREATE TABLE IF NOT EXISTS tenants (name TEXT PRIMARY KEY, config TEXT NOT NULL DEFAULT '{}');
CREATE TABLE IF NOT EXISTS namespaces (
    name TEXT PRIMARY KEY, tenant TEXT NOT NULL REFERENCES tenants(name), config TEXT NOT NULL DEFAULT '{}');
CREATE TABLE IF NOT EXISTS topics (
    name TEXT PRIMARY KEY, namespace TEXT NOT NULL REFERENCES namespaces(name),
    partitions INTEGER NOT NULL, config TEXT NOT NULL, created_ms INTEGER NOT NULL);
"""


@dataclass(frozen=True)
class TopicRecord:
    name: TopicName
    partitions: int
    config: dict[str, Any]  # only the settings given at creation; the rest follow the broker defaults
    created_ms: int


class Metadata:
    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(SCHEMA)
            self._ensure_namespace("public", "default")

    def _ensure_namespace(self, tenant: str, namespace: str) -> None:
        self._db.execute("INSERT OR IGNORE INTO tenants(name) VALUES (?)", (tenant,))
        self._db.execute("INSERT OR IGNORE INTO namespaces(name, tenant) VALUES (?, ?)",
                         (f"{tenant}/{namespace}", tenant))

    def create_topic(self, name: TopicName, partitions: int, config: dict[str, Any], created_ms: int) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._ensure_namespace(name.tenant, name.namespace)
                self._db.execute("INSERT INTO topics VALUES (?, ?, ?, ?, ?)",
                                 (str(name), name.namespace_name, partitions, json.dumps(config), created_ms))
            except sqlite3.IntegrityError:
                self._db.execute("ROLLBACK")
                raise TopicExistsError(f"topic {name} already exists") from None
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def topic(self, name: TopicName) -> TopicRecord:
        with self._lock:
            row = self._db.execute("SELECT partitions, config, created_ms FROM topics WHERE name = ?",
                                   (str(name),)).fetchone()
        if row is None:
            raise TopicNotFoundError(f"topic {name} does not exist")
        return TopicRecord(name, row[0], json.loads(row[1]), row[2])

    def list_topics(self) -> list[str]:
        with self._lock:
            return [row[0] for row in self._db.execute("SELECT name FROM topics ORDER BY name")]

    def delete_topic(self, name: TopicName) -> None:
        with self._lock:
            deleted = self._db.execute("DELETE FROM topics WHERE name = ?", (str(name),)).rowcount
        if not deleted:
            raise TopicNotFoundError(f"topic {name} does not exist")

    def close(self) -> None:
        with self._lock:
            self._db.close()
