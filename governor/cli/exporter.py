"""``governor exporter``: Prometheus metrics of every GPU on this host.

Serves ``/metrics`` until SIGTERM or Ctrl-C; see :mod:`governor.runtime.exporter` for the
series. Needs the ``metrics`` extra (``pip install 'gpu-governor[metrics]'``).
"""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any, List, Tuple

import typer

from governor.cli.common import Annotated, DeviceOpt, JsonOpt, emit_json


def register(app: typer.Typer) -> None:
    app.command("exporter")(exporter_command)


def realtime_uri(uri: str) -> str:
    """``uri`` with ``realtime=1`` added to its options (``sim:t4`` -> ``sim:t4?realtime=1``)."""
    base, _, query = uri.partition("?")
    options = [o for o in query.split("&") if o and o.split("=")[0] != "realtime"]
    return f"{base}?{'&'.join(options + ['realtime=1'])}"


def _refuse_virtual_time(dev: Any) -> None:
    """A simulated board on virtual time stands still between scrapes (only a load loop
    advances it): refuse it, with the URI that runs it in real time.

    Raises:
        click.BadParameter (exit 2): the device runs on virtual time.
    """
    if dev.clock.virtual:
        uri = dev.uri
        raise typer.BadParameter(
            f"{uri} runs on virtual time, which only a load loop advances: its power would "
            f"never change and its energy stay at 0 J; use {realtime_uri(uri)}",
            param_hint="--device",
        )


def exporter_command(
    device: DeviceOpt = "all",
    listen: Annotated[
        str,
        typer.Option(
            "--listen",
            envvar="GOVERNOR_METRICS_LISTEN",
            help="ADDR:PORT to serve /metrics on (port 0: any free port).",
        ),
    ] = "127.0.0.1:9400",
    json_out: JsonOpt = False,
) -> None:
    """Serve Prometheus metrics (power per rail, energy, clocks, temperature, policy) of every
    device (--device all, the default) until stopped."""
    from governor.devices.registry import open_device, resolve_uris
    from governor.errors import InvalidRequestError
    from governor.fleet.slurm import running_policies
    from governor.runtime.exporter import import_prometheus, parse_listen, serve_metrics

    import_prometheus()  # before opening anything: a missing extra is a one-line error
    try:
        parse_listen(listen)
    except ValueError as err:
        raise InvalidRequestError(f"--listen: {err}") from None
    devices = []
    server = None
    try:
        uris, waiting = _uris(device, resolve_uris)
        for uri in uris:
            devices.append(open_device(uri))
            _refuse_virtual_time(devices[-1])
        server = serve_metrics(
            devices, listen, policy_of=running_policies(), waiting=waiting, opener=open_device
        )
        url = f"http://{server.addr}:{server.port}/metrics"
        if json_out:
            emit_json(
                {
                    "listen": f"{server.addr}:{server.port}",
                    "url": url,
                    "devices": [d.uri for d in devices],
                }
            )
        typer.echo(f"governor: serving metrics of {len(devices)} device(s) on {url}", err=True)
        stop = threading.Event()
        previous = {}
        for signum in (signal.SIGTERM, signal.SIGINT):
            previous[signum] = signal.signal(signum, lambda *_: stop.set())
        try:
            while not stop.wait(1.0):
                pass
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            server.close()
        sys.stderr.write("governor: exporter stopped\n")
    finally:
        for dev in server.collector.devices if server is not None else devices:
            dev.close()


def _uris(device: str, resolve_uris: Any) -> Tuple[List[str], List[str]]:
    """The URIs to serve, and (``--device all``) those of GPUs NVML counts but reports lost:
    served as down until they answer, so a GPU lost before the exporter started is not
    missing from its scrapes.

    Raises:
        DeviceNotFoundError: ``all`` on a host with no GPU at all, lost or not.
    """
    from governor.devices.nvml import discover_nvml
    from governor.errors import DeviceNotFoundError

    if device.strip() != "all":
        return resolve_uris(device), []
    lost: List[str] = []
    discover_nvml(lost)
    try:
        return resolve_uris(device), lost
    except DeviceNotFoundError:
        if not lost:
            raise
        return [], lost
