"""seglog's version, in a module of its own: the server and the replication name it in what they send, and
importing the `seglog` package for it would load the in-process facade they never use."""

__version__ = "0.1.0"
