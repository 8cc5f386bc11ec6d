"""Prometheus metrics of every device on the host: power per rail, energy, clocks, temperature,
the policy in force and the energy budget left.

Served by ``governor exporter`` and, with ``daemon.metrics_listen`` set, by the daemon. Each
scrape reads every device once (reading never takes a lock or writes anything). Names follow
Prometheus' conventions: base units in the name (``_watts``, ``_joules_total``, ``_hertz``,
``_celsius``, ``_ratio``); MHz become Hz here, at the edge. Every series carries ``uuid`` (the
GPU's UUID, or the device's identity key where it has no UUID), ``board`` (the catalog model)
and ``device`` (the URI it was opened by); power also ``rail`` and ``scope`` (what the figure
covers: ``gpu``, ``gpu+soc``, ``board input``...).

A device that cannot be read (a GPU lost, a driver timing out past its retries) is
``governor_device_up 0`` with no other series, while the others are served as usual; the
warning is logged once when it starts failing and once when it answers again, not at every
scrape. A GPU already lost when the exporter starts (``--device all``) is served the same way
until it answers, and from then on like the others.

``prometheus-client`` is imported only here, when metrics are served (``pip install
'gpu-governor[metrics]'``).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from governor.devices.base import Device, Sample
from governor.errors import GovernorError

__all__ = [
    "ClusterCollector",
    "DeviceCollector",
    "MetricsServer",
    "import_prometheus",
    "parse_listen",
    "serve_cluster_metrics",
    "serve_metrics",
]

log = logging.getLogger("governor.runtime.exporter")

#: what a policy provider returns for a device: {"policy", "source", "budget_remaining_j"}
PolicyOf = Callable[[Device], Mapping[str, Any]]

_INSTALL = "the metrics exporter needs prometheus-client: pip install 'gpu-governor[metrics]'"


def import_prometheus() -> Any:
    """The ``prometheus_client`` module.

    Raises:
        GovernorError: it is not installed (the message says what to install).
    """
    try:
        import prometheus_client
    except ImportError:
        raise GovernorError(_INSTALL) from None
    return prometheus_client


def parse_listen(text: str, default_port: int = 9400) -> Tuple[str, int]:
    """``(address, port)`` from ``ADDR:PORT``, ``:PORT`` or ``PORT``.

    Raises:
        ValueError: not one of those, or a port outside 0-65535.
    """
    text = str(text).strip()
    addr, sep, port_text = text.rpartition(":")
    if not sep:
        addr, port_text = "", text
    addr = addr.strip("[]") or "0.0.0.0"
    try:
        port = int(port_text) if port_text else default_port
    except ValueError:
        raise ValueError(
            f"bad listen address {text!r}: use ADDR:PORT, e.g. 127.0.0.1:9400"
        ) from None
    if not 0 <= port <= 65535:
        raise ValueError(f"port {port} is outside 0-65535")
    return addr, port


def _labels(device: Device) -> List[str]:
    ident = device.identity
    return [ident.uuid or ident.key or ident.uri, ident.model, ident.uri]


class DeviceCollector:
    """A prometheus-client collector that reads ``devices`` at each scrape."""

    BASE = ("uuid", "board", "device")

    def __init__(
        self,
        devices: Sequence[Device],
        policy_of: Optional[PolicyOf] = None,
        *,
        waiting: Sequence[str] = (),
        opener: Optional[Callable[[str], Device]] = None,
    ) -> None:
        self.devices = list(devices)
        self.policy_of = policy_of
        #: URIs of devices that could not be opened yet (a GPU lost before the exporter
        #: started): ``up`` 0 until ``opener`` opens one, then served like the others
        self.waiting = list(waiting)
        self._opener = opener
        self._lock = threading.Lock()
        self._down: Dict[str, str] = {}  # device URI -> why it is down (its failed episode)
        # device URI -> the opening in progress of a waiting device: a wedged GPU's open
        # blocks, so it runs on a thread of its own and a scrape waits for it OPEN_WAIT_S
        self._opening: Dict[str, _Opening] = {}

    #: how long a scrape waits for a waiting device to open (s); one that takes longer is
    #: left opening in the background and served from the first scrape after it opened
    OPEN_WAIT_S = 1.0

    def describe(self) -> List[Any]:
        return []  # no reading of the devices when the collector is registered

    def collect(self) -> Iterator[Any]:
        families = _Families(list(self.BASE))
        with self._lock:
            self._open_waiting(families)
            for device in self.devices:
                self._read(device, families)
        yield from families.all()

    def _open_waiting(self, families: _Families) -> None:
        """Try to open each waiting device: one that opens joins the devices read from now
        on; one that does not is ``up`` 0 (its URI stands in for its UUID and board)."""
        for uri in list(self.waiting):
            try:
                if self._opener is None:
                    raise GovernorError(f"{uri}: cannot be opened")
                opening = self._opening.get(uri)
                if opening is None:
                    opening = self._opening[uri] = _Opening(self._opener, uri)
                    opening.done.wait(self.OPEN_WAIT_S)
                if not opening.done.is_set():
                    raise GovernorError(
                        self._down.get(uri) or f"{uri}: not responding: still opening"
                    )
                del self._opening[uri]
                device = opening.result()
            except GovernorError as err:
                if uri not in self._down:
                    log.warning("%s: down, not read until it answers: %s", uri, err)
                self._down[uri] = str(err)
                families.up.add_metric([uri, "", uri], 0.0)
                continue
            self.waiting.remove(uri)
            self.devices.append(device)

    def _read(self, device: Device, families: _Families) -> None:
        """Add ``device``'s series to ``families``: its sample (or ``up`` 0 when it cannot be
        read) and the policy in force."""
        labels = _labels(device)
        try:
            sample = device.sample()
        except GovernorError as err:
            if device.uri not in self._down:
                log.warning("%s: down, not read until it answers: %s", device.uri, err)
            self._down[device.uri] = str(err)
            families.up.add_metric(labels, 0.0)
            return
        if self._down.pop(device.uri, None) is not None:
            log.warning("%s: answers again", device.uri)
        families.up.add_metric(labels, 1.0)
        families.add_sample(labels, sample)
        info: Mapping[str, Any] = {}
        if self.policy_of is not None:
            try:
                info = self.policy_of(device) or {}
            except Exception as err:  # a provider's bug must not break the scrape
                log.warning("%s: policy unknown: %s", device.uri, err)
        families.policy.add_metric(
            labels + [str(info.get("policy") or "none"), str(info.get("source") or "")],
            1.0,
        )
        left = info.get("budget_remaining_j")
        if left is not None:
            families.budget.add_metric(labels, float(left))


class _Opening:
    """``opener(uri)`` on a thread of its own; :meth:`result` once ``done`` is set."""

    def __init__(self, opener: Callable[[str], Device], uri: str) -> None:
        self.done = threading.Event()
        self._device: Optional[Device] = None
        self._error: Optional[GovernorError] = None

        def run() -> None:
            try:
                self._device = opener(uri)
            except GovernorError as err:
                self._error = err
            except Exception as err:  # a backend's bug: the scrape says it, not a traceback
                self._error = GovernorError(f"{uri}: cannot be opened: {err}")
            self.done.set()

        threading.Thread(target=run, name=f"governor-open {uri}", daemon=True).start()

    def result(self) -> Device:
        """The device opened.

        Raises:
            GovernorError: it could not be opened.
        """
        if self._error is not None:
            raise self._error
        assert self._device is not None
        return self._device


class _Families:
    """The metric families of one scrape (``base``: the labels every series carries), filled
    device by device."""

    def __init__(self, base: List[str]) -> None:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        self.up = GaugeMetricFamily(
            "governor_device_up", "1 when the device answered this scrape, 0 when not.", labels=base
        )
        self.power = GaugeMetricFamily(
            "governor_power_watts",
            "Power now, per rail; scope says what the rail covers (gpu, gpu+soc, board input...).",
            labels=base + ["rail", "scope"],
        )
        self.energy = CounterMetricFamily(
            "governor_energy_joules",
            "The device's energy counter (J since an arbitrary origin, e.g. the driver load).",
            labels=base,
        )
        self.clock = GaugeMetricFamily(
            "governor_clock_hertz",
            "Clock now, by domain (graphics, memory).",
            labels=base + ["domain"],
        )
        self.temperature = GaugeMetricFamily(
            "governor_temperature_celsius", "GPU temperature.", labels=base
        )
        self.utilisation = GaugeMetricFamily(
            "governor_utilisation_ratio", "GPU utilisation (0-1).", labels=base
        )
        self.policy = GaugeMetricFamily(
            "governor_policy_info",
            "The policy in force on the device (1), with who set it (a Slurm job, the daemon).",
            labels=base + ["policy", "source"],
        )
        self.budget = GaugeMetricFamily(
            "governor_budget_remaining_joules",
            "Energy left of the budget an energy/battery policy enforces.",
            labels=base,
        )

    def add_sample(self, labels: List[str], sample: Sample) -> None:
        """The readings of one sample: power per rail (or the device's one figure), energy,
        clocks in Hz, temperature and utilisation as a ratio; a missing reading adds nothing."""
        if sample.rails:
            for rail in sample.rails:
                self.power.add_metric(labels + [rail.name, rail.scope], rail.power_w)
        elif sample.power_w is not None:
            scope = sample.power_scope or "gpu"
            self.power.add_metric(labels + [scope, scope], sample.power_w)
        if sample.energy_j is not None:
            self.energy.add_metric(labels, sample.energy_j)
        if sample.gpu_clock_mhz is not None:
            self.clock.add_metric(labels + ["graphics"], sample.gpu_clock_mhz * 1e6)
        if sample.mem_clock_mhz is not None:
            self.clock.add_metric(labels + ["memory"], sample.mem_clock_mhz * 1e6)
        if sample.temperature_c is not None:
            self.temperature.add_metric(labels, sample.temperature_c)
        if sample.utilisation_pct is not None:
            self.utilisation.add_metric(labels, sample.utilisation_pct / 100.0)

    def all(self) -> Tuple[Any, ...]:
        """Every family, in the order a scrape lists them."""
        return (
            self.up,
            self.power,
            self.energy,
            self.clock,
            self.temperature,
            self.utilisation,
            self.policy,
            self.budget,
        )


class MetricsServer:
    """The HTTP endpoint serving a :class:`DeviceCollector` (``/metrics``) in a thread."""

    def __init__(self, collector: DeviceCollector, addr: str, port: int) -> None:
        prom = import_prometheus()
        from prometheus_client import CollectorRegistry

        self.collector = collector
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        started = prom.start_http_server(port, addr=addr, registry=self.registry)
        self._httpd = started[0] if isinstance(started, tuple) else None
        self.addr = addr
        self.port = int(self._httpd.server_port) if self._httpd is not None else port

    def close(self) -> None:
        """Stop serving (safe to repeat)."""
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()


def serve_metrics(
    devices: Sequence[Device],
    listen: str = "127.0.0.1:9400",
    *,
    policy_of: Optional[PolicyOf] = None,
    waiting: Sequence[str] = (),
    opener: Optional[Callable[[str], Device]] = None,
) -> MetricsServer:
    """Serve metrics of ``devices`` on ``listen`` (``ADDR:PORT``; port 0 picks a free one),
    and of each URI in ``waiting`` once ``opener`` opens it (down until then).

    Raises:
        GovernorError: prometheus-client is missing, or the address cannot be bound.
    """
    addr, port = parse_listen(listen)
    try:
        collector = DeviceCollector(devices, policy_of, waiting=waiting, opener=opener)
        return MetricsServer(collector, addr, port)
    except OSError as err:
        raise GovernorError(
            f"cannot serve metrics on {addr}:{port}: {err.strerror or err}"
        ) from err


class ClusterCollector:
    """The cluster budget service's series (issue 45), from ``snapshot()`` at each scrape:
    ``{"budget_w", "gpus": [{"node", "gpu", "uuid", "job", "cap_w", "power_w", "up"}]}``.

    - ``governor_cluster_budget_watts``: the budget;
    - ``governor_cluster_allocated_watts``: the sum of the caps in force (at most the budget);
    - ``governor_cluster_gpu_cap_watts{node,gpu,uuid,slurm_job}``: each GPU's cap as its
      node confirmed it (``slurm_job`` empty on an idle GPU);
    - ``governor_cluster_gpu_power_watts{node,gpu,uuid,slurm_job}``: its measured power;
    - ``governor_cluster_node_up{node}``: 1 when the node's daemon answered the last round;
    - ``governor_cluster_rounds_total``: the rounds (read, split, enforce) done so far.
    """

    def __init__(self, snapshot: Callable[[], Mapping[str, Any]]) -> None:
        self.snapshot = snapshot

    def describe(self) -> List[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        snap = self.snapshot()
        labels = ["node", "gpu", "uuid", "slurm_job"]  # "job" is Prometheus' own label
        budget = GaugeMetricFamily(
            "governor_cluster_budget_watts", "The cluster's power budget (W)."
        )
        budget.add_metric([], float(snap["budget_w"]))
        allocated = GaugeMetricFamily(
            "governor_cluster_allocated_watts", "The sum of the GPU caps in force (W)."
        )
        cap = GaugeMetricFamily(
            "governor_cluster_gpu_cap_watts", "The GPU's allocated power cap (W).", labels=labels
        )
        power = GaugeMetricFamily(
            "governor_cluster_gpu_power_watts", "The GPU's measured power (W).", labels=labels
        )
        up = GaugeMetricFamily(
            "governor_cluster_node_up", "1 when the node's daemon answered.", labels=["node"]
        )
        total = 0.0
        nodes: Dict[str, bool] = {}
        for gpu in snap.get("gpus", ()):
            row = [str(gpu.get(k) or "") for k in ("node", "gpu", "uuid", "job")]
            if gpu.get("cap_w") is not None:
                cap.add_metric(row, float(gpu["cap_w"]))
                total += float(gpu["cap_w"])
            if gpu.get("power_w") is not None:
                power.add_metric(row, float(gpu["power_w"]))
            nodes[str(gpu.get("node"))] = nodes.get(str(gpu.get("node")), True) and bool(
                gpu.get("up")
            )
        allocated.add_metric([], total)
        for node, answered in sorted(nodes.items()):
            up.add_metric([node], 1.0 if answered else 0.0)
        rounds = CounterMetricFamily("governor_cluster_rounds", "Rounds done by the service.")
        rounds.add_metric([], float(snap.get("rounds", 0)))
        yield from (budget, allocated, cap, power, up, rounds)


def serve_cluster_metrics(
    snapshot: Callable[[], Mapping[str, Any]], listen: str = "127.0.0.1:9401"
) -> MetricsServer:
    """Serve the cluster service's metrics (:class:`ClusterCollector`) on ``listen``.

    Raises:
        GovernorError: prometheus-client is missing, or the address cannot be bound.
    """
    addr, port = parse_listen(listen, default_port=9401)
    try:
        return MetricsServer(ClusterCollector(snapshot), addr, port)  # type: ignore[arg-type]
    except OSError as err:
        raise GovernorError(
            f"cannot serve metrics on {addr}:{port}: {err.strerror or err}"
        ) from err


def policies_from_records(records: Mapping[str, Mapping[str, Any]]) -> PolicyOf:
    """A provider for devices whose policy is set from outside (a Slurm job): ``records``
    maps a GPU UUID (any case) to ``{"policy", "source"}``."""
    lowered: Dict[str, Mapping[str, Any]] = {k.lower(): v for k, v in records.items()}

    def policy_of(device: Device) -> Mapping[str, Any]:
        uuid = (device.identity.uuid or "").lower()
        return lowered.get(uuid, {})

    return policy_of
