"""Tenants, namespaces and topics, their settings and policies: pure data and the SQLite metadata store."""
