"""`seglog serve`: a broker that speaks Pulsar's binary protocol, so Pulsar clients produce to the data
directory (docs/SERVER.md). The first line on stdout is `pulsar://HOST:PORT http://HOST:PORT`."""

from __future__ import annotations

import logging

import click

from seglog.cli.base import SeglogCommand
from seglog.cli.datadir import DataDir, pass_data


@click.command(cls=SeglogCommand)
@click.option("--cluster", required=True, help="This cluster's name (Pulsar's --cluster; names generated producers).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind. Another than loopback needs --allow-unauthenticated (no auth yet).")
@click.option("--port", default=6650, show_default=True, type=click.IntRange(0, 65535),
              help="Binary protocol port; 0 picks a free one.")
@click.option("--http-port", default=8080, show_default=True, type=click.IntRange(0, 65535),
              help="Admin REST and HTTP lookup port; 0 picks a free one.")
@click.option("--advertised-address", default=None, metavar="HOST",
              help="Host name clients reach this server by (lookups answer it). Default: --host.")
@click.option("--allow-unauthenticated", is_flag=True, help="Allow binding a non-loopback address.")
@click.option("--keepalive", default=30.0, show_default=True, type=click.FloatRange(min=0.05),
              help="Seconds between PINGs to silent clients; one more interval without an answer closes them.")
@click.option("--log-level", default="WARNING", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
              help="What the server logs to stderr (INFO: connections, producers and consumers closed by it).")
@pass_data
def serve(data: DataDir, cluster: str, host: str, port: int, http_port: int, advertised_address: str | None,
          allow_unauthenticated: bool, keepalive: float, log_level: str) -> None:
    """Serve the data directory to Pulsar clients (pulsar://) until SIGTERM or SIGINT.

    \b
    Example:
      seglog --data ./d serve --cluster standalone --port 0 --http-port 0
    """
    from seglog.server import ServeOptions, run

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    options = ServeOptions(data.path, cluster, host, port, http_port, advertised_address, allow_unauthenticated,
                           keepalive)

    def ready(pulsar_url: str, http_url: str) -> None:
        click.echo(f"{pulsar_url} {http_url}")

    run(options, ready)
