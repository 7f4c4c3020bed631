"""`seglog serve`: a broker that speaks Pulsar's binary protocol, so Pulsar clients produce to the data
directory (docs/SERVER.md). The first line on stdout names every port: `pulsar://HOST:PORT http://HOST:PORT`,
then `pulsar+ssl://HOST:PORT` and `https://HOST:PORT` for --tls-port and --https-port (with a certificate
and neither of them, the first two are `pulsar+ssl://` and `https://`), and last the Flight port's
`grpc://HOST:PORT` (`grpc+tls://` with a certificate).

At the default log level it logs a ready line (the URLs) and a stopped line to stderr; while it serves,
`serve.json` in the data directory records its pid and URLs (serve_record.py), so that a command refused by
the writer lock of a partition it writes says to produce through it. A port that cannot be bound exits with
1, naming the option that sets it."""

from __future__ import annotations

import logging
import os
import sys
from functools import partial
from pathlib import Path

import click

from seglog.cli.base import SeglogCommand
from seglog.cli.datadir import DataDir, pass_data
from seglog.cli.errors import CliError, CliFailure
from seglog.cli.options import SIZE_METAVAR, SIZE_UNITS, byte_size
from seglog.cli.serve_record import write_record
from seglog.errors import InvalidArgumentError

DEFAULT_CLUSTER = "standalone"  # Pulsar standalone's cluster name
PORT_OPTIONS = ("--port", "--http-port", "--tls-port", "--https-port", "--flight-port")
lifecycle = logging.getLogger("seglog.serve")  # the ready and stopped lines


def _roles(ctx: click.Context, param: click.Parameter, given: str) -> tuple[str, ...]:
    """'a,b' as ('a', 'b'); '' as ()."""
    if not given:
        return ()
    roles = tuple(role.strip() for role in given.split(","))
    if not all(roles):
        raise click.BadParameter(f"{given!r} is not a comma-separated list of role names", ctx, param)
    return roles


@click.command(cls=SeglogCommand)
@click.option("--cluster", default=DEFAULT_CLUSTER, show_default=True,
              help="This cluster's name (Pulsar's --cluster; names generated producers). A data directory keeps "
                   "the name it was first served with: serving it as another is refused.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind. Another than loopback needs an authentication provider "
                   "(--auth-token-secret-key, --auth-basic-file, --auth-tls) or --allow-unauthenticated.")
@click.option("--port", default=6650, show_default=True, type=click.IntRange(0, 65535),
              help="Binary protocol port; 0 picks a free one.")
@click.option("--http-port", default=8080, show_default=True, type=click.IntRange(0, 65535),
              help="Admin REST and HTTP lookup port; 0 picks a free one.")
@click.option("--flight-port", default=8815, show_default=True, type=click.IntRange(0, 65535),
              help="Arrow Flight port (grpc://, grpc+tls:// with --tls-cert-file): ranges of partitions as Arrow "
                   "record batches, for query engines such as Spark; 0 picks a free one.")
@click.option("--advertised-address", default=None, metavar="HOST",
              help="Host name clients reach this server by (lookups answer it). Default: --host.")
@click.option("--allow-unauthenticated", is_flag=True,
              help="Allow binding a non-loopback address without authentication: anyone may do anything.")
@click.option("--auth-token-secret-key", "secret_key", type=click.Path(dir_okay=False, path_type=Path),
              metavar="FILE", help="Authenticate clients by tokens signed with this secret key (its raw bytes, "
                                   "as `seglog tokens create-secret-key` writes it); the token's subject is the "
                                   "client's role.")
@click.option("--auth-basic-file", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="Authenticate clients by user and password (AuthenticationBasic) against this htpasswd file "
                   "(APR1-MD5 or DES crypt hashes, as Pulsar's basicAuthConf); the user is the client's role.")
@click.option("--auth-tls", is_flag=True,
              help="Authenticate clients by their TLS certificate (AuthenticationTLS), verified against "
                   "--tls-trust-certs-file; its subject's common name (CN) is the client's role.")
@click.option("--superuser-roles", default="", metavar="R1,R2", callback=_roles,
              help="Roles that may do everything (with an authentication provider).")
@click.option("--anonymous-user-role", default=None, metavar="ROLE",
              help="The role of clients that present no credentials, or use a method the server has no provider "
                   "for (Pulsar's anonymousUserRole); without it they are refused.")
@click.option("--tls-cert-file", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="PEM certificate (chain) of the server: TLS on --tls-port and --https-port, or, without "
                   "them, on both main ports only (pulsar+ssl://, https://).")
@click.option("--tls-key-file", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="The certificate's PEM private key (with --tls-cert-file).")
@click.option("--tls-port", default=None, type=click.IntRange(0, 65535),
              help="Binary protocol over TLS (pulsar+ssl://) beside --port, as Pulsar's brokerServicePortTls; "
                   "0 picks a free one.")
@click.option("--https-port", default=None, type=click.IntRange(0, 65535),
              help="Admin REST and HTTP lookup over TLS (https://) beside --http-port, as Pulsar's "
                   "webServicePortTls; 0 picks a free one.")
@click.option("--tls-trust-certs-file", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="PEM CA certificates that sign clients' certificates: a client certificate is verified when "
                   "presented (one they do not sign fails the handshake); clients without one still connect.")
@click.option("--tls-require-trusted-client-cert", is_flag=True,
              help="Refuse TLS clients without a certificate the trusted CAs sign (Pulsar's "
                   "tlsRequireTrustedClientCertOnConnect).")
@click.option("--keepalive", default=30.0, show_default=True, type=click.FloatRange(min=0.05),
              help="Seconds between PINGs to silent clients; one more interval without an answer closes them.")
@click.option("--max-message-size", default=5 * 1024 * 1024, show_default=True, type=click.IntRange(1024, 1 << 30),
              metavar="BYTES", help="The largest message (frame) accepted, as Pulsar's maxMessageSize; clients "
                                    "learn it on connecting and chunk larger messages when chunking is on.")
@click.option("--max-messages-per-batch", default=10_000, show_default=True, type=click.IntRange(1),
              help="The most messages one SEND may carry; a larger batch is refused (ChecksumError) before it is "
                   "unpacked, as each message costs the server memory while its batch is written.")
@click.option("--max-unacked-messages-per-consumer", default=50_000, show_default=True, type=click.IntRange(0),
              help="Messages a consumer may hold unacknowledged before it is sent no more until it acknowledges "
                   "some (Pulsar's maxUnackedMessagesPerConsumer); 0: no bound.")
@click.option("--precise-dispatcher-flow-control", is_flag=True,
              help="Never send a consumer more messages than its permits, cutting a stored batch to fit them "
                   "(Pulsar's preciseDispatcherFlowControl). Default, as Pulsar's: a read sends as many stored "
                   "batches as the consumer has permits, whole (at most 100 and 5 MiB), and its permits go below "
                   "zero by the excess until its FLOWs make up for it.")
@click.option("--max-publish-buffer", default="256MiB", show_default=True, callback=byte_size,
              metavar=SIZE_METAVAR,
              help="Bytes of SENDs received and not yet written, in all, past which every connection stops "
                   f"reading until writes catch up (Pulsar's maxMessagePublishBufferSizeInMB). {SIZE_UNITS}.")
@click.option("--max-connection-publish-buffer", default="16MiB", show_default=True, callback=byte_size,
              metavar=SIZE_METAVAR, help="The same, per connection (Pulsar's "
                                         "maxPendingPublishRequestsPerConnection, in bytes).")
@click.option("--configuration-store", default=None, metavar="etcd://HOST:PORT[,HOST:PORT]",
              help="Share clusters, tenants, namespaces and partitioned topics with the other clusters that use "
                   "this etcd (Pulsar's configurationMetadataStoreUrl; docs/REPLICATION.md, Configuration "
                   "stores). Default: this data directory's own (independent stores).")
@click.option("--configuration-sync-topic", default=None, metavar="TENANT/NS/TOPIC",
              help="Synchronize clusters, tenants, namespaces and partitioned topics with the other clusters "
                   "through this topic, whose namespace replicates to all of them (Pulsar's "
                   "configurationMetadataSyncEventTopic, PIP-136; docs/REPLICATION.md, Configuration stores). "
                   "Not with --configuration-store.")
@click.option("--log-level", default="WARNING", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
              help="What the server logs to stderr (INFO: connections, producers and consumers closed by it); "
                   "the ready and stopped lines show at every level but ERROR.")
@pass_data
def serve(data: DataDir, cluster: str, host: str, port: int, http_port: int, flight_port: int,
          advertised_address: str | None,
          allow_unauthenticated: bool, secret_key: Path | None, auth_basic_file: Path | None, auth_tls: bool,
          superuser_roles: tuple[str, ...], anonymous_user_role: str | None, tls_cert_file: Path | None,
          tls_key_file: Path | None, tls_port: int | None, https_port: int | None,
          tls_trust_certs_file: Path | None, tls_require_trusted_client_cert: bool, keepalive: float,
          max_message_size: int, max_messages_per_batch: int, max_unacked_messages_per_consumer: int,
          precise_dispatcher_flow_control: bool, max_publish_buffer: int,
          max_connection_publish_buffer: int, configuration_store: str | None, configuration_sync_topic: str | None,
          log_level: str) -> None:
    """Serve the data directory to Pulsar clients (pulsar://) until SIGTERM or SIGINT.

    \b
    Examples:
      seglog --data ./d serve --port 0 --http-port 0 --flight-port 0
      seglog tokens create-secret-key --output secret.key
      seglog --data ./d serve --cluster standalone --host 0.0.0.0 \\
          --auth-token-secret-key secret.key --superuser-roles admin \\
          --tls-cert-file server.pem --tls-key-file server.key
      seglog --data ./d serve --cluster standalone --tls-port 6651 --https-port 8443 \\
          --tls-cert-file server.pem --tls-key-file server.key --tls-trust-certs-file ca.pem \\
          --auth-tls --auth-basic-file .htpasswd --superuser-roles admin
      seglog --data ./east serve --cluster east --configuration-store etcd://127.0.0.1:2379
      seglog --data ./east serve --cluster east --configuration-sync-topic seglog/config/events
    """
    from seglog.replication.config_store import parse_etcd_url
    from seglog.replication.config_sync import parse_sync_topic
    from seglog.replication.service import ReplicationService
    from seglog.server import ServeOptions, run

    if configuration_store is not None and configuration_sync_topic is not None:
        raise click.UsageError("--configuration-store and --configuration-sync-topic exclude each other: the "
                               "configuration is shared through etcd or synchronized through a topic, not both")
    if configuration_store is not None:  # (refused before anything is opened)
        parse_etcd_url(configuration_store)
    if configuration_sync_topic is not None:
        parse_sync_topic(configuration_sync_topic)

    level = logging.getLevelName(log_level.upper())
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    lifecycle.setLevel(logging.INFO if level <= logging.WARNING else level)
    options = ServeOptions(data.path, cluster, host, port, http_port, advertised_address, allow_unauthenticated,
                           keepalive, max_message_size, auth_secret_key=secret_key, auth_basic_file=auth_basic_file,
                           auth_tls=auth_tls, superuser_roles=superuser_roles, anonymous_role=anonymous_user_role,
                           tls_cert_file=tls_cert_file, tls_key_file=tls_key_file, tls_port=tls_port,
                           https_port=https_port, flight_port=flight_port, tls_trust_certs_file=tls_trust_certs_file,
                           tls_require_trusted_client_cert=tls_require_trusted_client_cert,
                           max_messages_per_batch=max_messages_per_batch,
                           max_unacked_messages_per_consumer=max_unacked_messages_per_consumer,
                           precise_dispatcher_flow_control=precise_dispatcher_flow_control,
                           max_publish_buffer=max_publish_buffer,
                           max_connection_publish_buffer=max_connection_publish_buffer)

    records: list[Path] = []

    def ready(urls: tuple[str, ...]) -> None:
        records.append(write_record(data.path, urls))  # before the URLs: whoever reads them finds it
        click.echo(" ".join(urls))
        lifecycle.info("ready: serving %s as cluster %s on %s", data.path, cluster, " ".join(urls))

    try:
        every_thread_ended = run(options, ready, partial(ReplicationService, configuration_store=configuration_store,
                                                         configuration_sync_topic=configuration_sync_topic))
    except InvalidArgumentError as error:
        refused = _port_refused(error, host)
        if refused is None:
            raise
        raise refused from None
    finally:
        for record in records:  # only the one this server wrote: a second server refused leaves the first's
            record.unlink(missing_ok=True)
    lifecycle.info("stopped: every message received was written; %s is closed", data.path)
    if not every_thread_ended:
        _end_process()


def _end_process() -> None:
    """End the process now, exit code 0: a Flight call whose client holds it unread outlasted the stop's bound
    (pyarrow cannot cancel it, and the interpreter's exit would wait for it for ever). Everything received is
    written and the data directory closed, as when Pulsar's broker is ended past brokerShutdownTimeoutMs."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _port_refused(error: InvalidArgumentError, host: str) -> CliError | None:
    """A port the operating system refused to listen on (in use, not permitted) as one line naming the
    option to change; exit code 1: the command line is right, the port is not free now."""
    cause = error.__context__
    if error.argument not in PORT_OPTIONS or not isinstance(cause, OSError):
        return None
    why = os.strerror(cause.errno) if cause.errno else "refused"  # (asyncio's own text shows a tuple)
    return CliFailure(f"cannot listen on {host}:{error.value} ({error.argument}): {why}; give "
                      f"{error.argument} another port, or {error.argument} 0 for a free one")
