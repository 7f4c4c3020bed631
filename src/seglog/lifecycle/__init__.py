"""Policies turned into cursor moves and deletions: backlog, retention, message TTL, backlog quotas."""
