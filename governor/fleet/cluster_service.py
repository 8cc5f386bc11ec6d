"""The cluster budget service (issue 45): one power budget split across the GPUs of the jobs
Slurm runs, enforced as power caps by each node's governor daemon.

Every period, and as soon as a job starts or ends (Slurm is asked which jobs run every
``min(period, 5 s)``), the service does a round:

1. asks **Slurm** which jobs run where (``scontrol show job -d``: each running job's nodes
   and GPU indices, its ``--comment`` for the kind of load) and which nodes the partition has
   (``sinfo``);
2. asks **each node's daemon** (``status``) what it holds: each GPU's model, settable range,
   the power limit in force, its lease and its measured power. What is in force comes from
   the nodes, never from the service's memory, so a restarted service starts from what the
   nodes hold;
3. splits the budget (:func:`governor.fleet.allocate.split_budget`): every GPU at least its
   lowest cap (an idle GPU exactly that), the rest by each job's marginal work per watt, from
   the curve of its GPU model and load kind, flattened above what the job is measured to draw
   when it draws well below its cap;
4. **enforces** it in two phases: first every cap that goes down (and every renewal), waiting
   for each node's reply; then the caps that go up, each only as far as the budget less
   everything in force (confirmed, or not known to be lowered) allows. So the sum of the caps
   in force never exceeds the budget at any instant.

Faults:

- a **node whose daemon does not answer** keeps its caps: the service counts them at their
  last known value (held, not handed out again) until the node answers; its lease then runs
  out on the node, which lowers its GPUs to the safe share by itself (see
  :mod:`governor.runtime.daemon.lease`);
- a cap request that fails counts at the higher of its old and new value (it may or may not
  have been applied);
- **the service stopping** (or a node losing it) lets the leases run out: each GPU falls to
  ``min(budget / GPUs known, its cap)``, never above what it had.

Each node's daemon is reached on a Unix socket named by a template (``{node}`` is the Slurm
node name): on a node where the service runs beside the daemon that is the daemon's own
socket; across hosts, a forwarded one (``ssh -L /run/governor/nodes/NODE.sock:
/run/governor/governor.sock NODE``), see docs/guides/cluster-budget.md.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from governor.errors import GovernorError, InvalidRequestError

__all__ = [
    "DEFAULT_SOCKET_TEMPLATE",
    "ClusterService",
    "GpuView",
    "JobOnGpu",
    "parse_jobs",
    "run_service",
]

log = logging.getLogger("governor.cluster")

DEFAULT_SOCKET_TEMPLATE = "/run/governor/nodes/{node}.sock"
#: load kinds a job names in its ``--comment`` (``governor:load=memory``, or the bare word)
LOADS = ("compute", "memory", "mixed", "bursty")
_LOAD_RE = re.compile(
    r"(?:^|[\s,;:])(?:load=|kind=)?(compute|memory|mixed|bursty)(?:$|[\s,;])", re.I
)


@dataclass
class GpuView:
    """One GPU as the service knows it (from its node's daemon)."""

    node: str
    uri: str
    index: int  # Slurm's GPU index on the node (the NVML index of nvml:N)
    uuid: str
    model: str
    min_w: float
    max_w: float
    cap_w: Optional[float]  # the power limit in force as the node last said or confirmed
    power_w: Optional[float] = None
    up: bool = True
    job: Optional[str] = None
    load: str = "mixed"
    powers: List[Tuple[float, float]] = field(default_factory=list)  # (cap, power) seen

    @property
    def gpu_id(self) -> str:
        return f"{self.node}/{self.uri}"


@dataclass(frozen=True)
class JobOnGpu:
    job: str
    load: str


# -- Slurm -------------------------------------------------------------------------------------
def _load_of(comment: str) -> str:
    match = _LOAD_RE.search(comment or "")
    return match.group(1).lower() if match else "mixed"


def parse_jobs(text: str, partition: Optional[str] = None) -> Dict[Tuple[str, int], JobOnGpu]:
    """(node, GPU index) -> the running job on it, from ``scontrol show job -d`` output."""
    from governor.fleet.slurm import (
        _job_comment,
        _scontrol_fields,
        expand_hostlist,
        scontrol_gpu_indices,
    )

    out: Dict[Tuple[str, int], JobOnGpu] = {}
    for record in re.split(r"\n\s*\n", text):
        if "JobId=" not in record:
            continue
        fields = _scontrol_fields(record)
        if fields.get("JobState") != "RUNNING":
            continue
        if partition and fields.get("Partition") != partition:
            continue
        job = JobOnGpu(fields["JobId"], _load_of(_job_comment(record)))
        for line in record.splitlines():
            line = line.strip()
            if not (line.startswith("Nodes=") and "GRES=" in line):
                continue
            nodes = expand_hostlist(line.split()[0].split("=", 1)[1])
            for index in scontrol_gpu_indices(line):
                for node in nodes:
                    out[(node, index)] = job
    return out


class Slurm:
    """The Slurm commands the service runs (``scontrol``, ``sinfo``)."""

    def __init__(self, partition: Optional[str] = None, timeout_s: float = 10.0) -> None:
        self.partition = partition
        self.timeout_s = timeout_s
        path = os.environ.get("PATH", "") + ":/usr/bin:/usr/local/bin:/bin"
        self.scontrol = shutil.which("scontrol", path=path)
        self.sinfo = shutil.which("sinfo", path=path)
        if self.scontrol is None or self.sinfo is None:
            raise GovernorError("the cluster service needs Slurm's scontrol and sinfo on PATH")

    def _run(self, argv: List[str]) -> str:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout_s)
        except (OSError, subprocess.SubprocessError) as err:
            raise GovernorError(f"{argv[0]}: {err}") from None
        if done.returncode != 0:
            why = (done.stderr or done.stdout).strip().splitlines()
            raise GovernorError(
                f"{' '.join(argv[:3])} failed: {why[-1] if why else done.returncode}"
            )
        return done.stdout

    def nodes(self) -> List[str]:
        argv = [str(self.sinfo), "-h", "-N", "-o", "%N"]
        if self.partition:
            argv[1:1] = ["-p", self.partition]
        seen: List[str] = []
        for name in self._run(argv).split():
            if name not in seen:
                seen.append(name)
        return seen

    def jobs(self) -> Dict[Tuple[str, int], JobOnGpu]:
        return parse_jobs(self._run([str(self.scontrol), "show", "job", "-d"]), self.partition)


# -- the nodes' daemons ------------------------------------------------------------------------
def _index_of(uri: str, position: int) -> int:
    match = re.fullmatch(r"nvml:([0-9]+)", uri)
    return int(match.group(1)) if match else position


def _curve(model: str, load: str) -> Tuple[Tuple[float, float], ...]:
    from governor.devices.sim.catalog import get_board
    from governor.fleet.allocate import work_curve

    try:
        board = get_board(model)
    except (GovernorError, KeyError, ValueError):
        board = get_board("a100-sxm")  # an unknown model: a datacenter GPU's shape
    return tuple(work_curve(board, "mixed" if load == "bursty" else load))


class ClusterService:
    """Split ``budget_w`` over the GPUs of ``partition``'s nodes (see the module docstring).

    ``ask(node, request)`` sends one request to a node's daemon and returns its result
    (raises GovernorError when the node does not answer)."""

    def __init__(
        self,
        budget_w: float,
        *,
        slurm: Any,
        ask: Callable[[str, Dict[str, Any]], Dict[str, Any]],
        period_s: float = 10.0,
        lease_s: Optional[float] = None,
        holder: str = "governor-cluster",
    ) -> None:
        if not (budget_w > 0):
            raise InvalidRequestError(f"--budget-w must be above 0, not {budget_w:g}")
        self.budget_w = float(budget_w)
        self.slurm = slurm
        self.ask = ask
        self.period_s = float(period_s)
        self.lease_s = float(lease_s) if lease_s is not None else max(3.0 * self.period_s, 1.0)
        self.holder = holder
        #: how often Slurm is asked whether the running jobs changed (s)
        self.watch_s = min(self.period_s, 5.0)
        self.gpus: Dict[str, GpuView] = {}
        self.nodes: List[str] = []
        self.rounds = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._running: Optional[List[str]] = None
        self._jobs_seen: Optional[Dict[Tuple[str, int], JobOnGpu]] = None
        #: nodes whose daemon answers but does not allow cap
        self.refusing: set = set()
        #: nodes whose daemon has answered since the service started: a node never heard from
        #: holds caps nobody knows, so while one is in the partition no cap is raised
        self.heard: set = set()
        self._unheard_said: List[str] = []

    # -- reading the cluster -------------------------------------------------------------------
    def poll(self) -> List[str]:
        """Refresh nodes, GPUs and jobs; returns the nodes whose daemon did not answer."""
        try:
            nodes = self.slurm.nodes()
        except GovernorError as err:
            log.warning("cannot list the nodes: %s (keeping %s)", err, ", ".join(self.nodes))
            nodes = list(self.nodes)
        try:
            jobs = self.slurm.jobs()
            self._jobs_seen = jobs
        except GovernorError as err:
            log.warning("cannot list the jobs: %s (keeping the last view)", err)
            jobs = {(g.node, g.index): JobOnGpu(g.job, g.load) for g in self.gpus.values() if g.job}
        silent: List[str] = []
        for node in nodes:
            try:
                status = self.ask(node, {"action": "status"})
            except GovernorError as err:
                held = [g for g in self.gpus.values() if g.node == node]
                if any(g.up for g in held) or not held:
                    log.warning(
                        "%s: the daemon does not answer (%s); holding its caps (%s W)",
                        node,
                        err,
                        sum(g.cap_w or 0 for g in held),
                    )
                for g in held:
                    g.up = False
                silent.append(node)
                continue
            allow = (status.get("daemon") or {}).get("allow")
            if isinstance(allow, list) and "cap" not in allow:
                if node not in self.refusing:
                    log.error(
                        '%s: the daemon does not allow cap (add "cap" to allow in its '
                        "config); holding its GPUs as they are",
                        node,
                    )
                self.refusing.add(node)
                for g in self.gpus.values():
                    if g.node == node:
                        g.up = False
                silent.append(node)
                continue
            self.refusing.discard(node)
            self._read_node(node, status)
            self.heard.add(node)
        self.nodes = nodes
        for g in self.gpus.values():
            on = jobs.get((g.node, g.index))
            if (on.job if on else None) != g.job:
                g.powers.clear()
            g.job, g.load = (on.job, on.load) if on else (None, "mixed")
        return silent

    def _read_node(self, node: str, status: Mapping[str, Any]) -> None:
        for position, dev in enumerate(status.get("devices", [])):
            info = dev.get("cluster") or {}
            rng = info.get("power_limit_range_w")
            if not rng:
                continue  # a device without a settable power limit takes no part
            uri = str(dev["uri"])
            gpu_id = f"{node}/{uri}"
            view = self.gpus.get(gpu_id)
            if view is None:
                view = self.gpus[gpu_id] = GpuView(
                    node=node,
                    uri=uri,
                    index=_index_of(uri, position),
                    uuid=str(info.get("uuid") or ""),
                    model=str(info.get("model") or dev.get("model") or ""),
                    min_w=float(rng[0]),
                    max_w=float(rng[1]),
                    cap_w=None,
                )
                log.info(
                    "%s: %s (%s, %g-%g W) in force %s W",
                    gpu_id,
                    view.uuid,
                    view.model,
                    view.min_w,
                    view.max_w,
                    info.get("power_limit_w"),
                )
            limit = info.get("power_limit_w")
            view.cap_w = float(limit) if limit is not None else view.max_w
            view.power_w = info.get("power_w")
            view.up = True
            if view.job and view.power_w is not None:
                view.powers.append((view.cap_w, float(view.power_w)))
                del view.powers[:-10]

    # -- deciding ------------------------------------------------------------------------------
    def least_budget_w(self) -> float:
        from governor.fleet.allocate import GpuDemand, least_budget_w

        return least_budget_w(
            [GpuDemand(g.gpu_id, g.min_w, g.max_w, False) for g in self.gpus.values()]
        )

    def _demand(self, g: GpuView) -> Any:
        from governor.fleet.allocate import GpuDemand

        if not g.job:
            return GpuDemand(g.gpu_id, g.min_w, g.max_w, False)
        curve = _curve(g.model, g.load)
        # refined online: a job measured well below its cap (waiting on input, bursty) gains
        # no work from watts above what it draws
        if len(g.powers) >= 3:
            seen = sorted(p for _, p in g.powers[-3:])[1]
            caps = [c for c, _ in g.powers[-3:]]
            if seen < 0.8 * min(caps):
                top = max(g.min_w, seen * 1.15)
                kept = [(c, w) for c, w in curve if c <= top]
                if kept:
                    flat = kept[-1][1]
                    curve = tuple(kept) + tuple((c, flat) for c, w in curve if c > top)
        return GpuDemand(g.gpu_id, g.min_w, g.max_w, True, curve)

    def plan(self) -> Dict[str, float]:
        """Each reachable GPU's target cap: the budget less the held caps, split."""
        from governor.fleet.allocate import least_budget_w, split_budget

        live = [g for g in self.gpus.values() if g.up]
        held = sum((g.cap_w or g.max_w) for g in self.gpus.values() if not g.up)
        demands = [self._demand(g) for g in live]
        room = self.budget_w - held
        if room < least_budget_w(demands):
            return {g.gpu_id: g.min_w for g in live}  # lowest caps until the held come back
        return split_budget(demands, room)

    # -- enforcing -----------------------------------------------------------------------------
    def _cap(self, g: GpuView, power_w: float) -> bool:
        known = len(self.gpus) or 1
        request = {
            "action": "cap",
            "device": g.uri,
            "power_w": round(power_w, 3),
            "lease_s": self.lease_s,
            "fallback_w": round(max(g.min_w, min(self.budget_w / known, power_w)), 3),
            "holder": self.holder,
        }
        try:
            result = self.ask(g.node, request)
        except GovernorError as err:
            log.warning("%s: cap %g W not confirmed: %s", g.gpu_id, power_w, err)
            g.cap_w = max(g.cap_w or g.max_w, power_w)  # it may have been applied
            return False
        lease = result.get("lease") or {}
        before = g.cap_w
        g.cap_w = float(lease.get("cap_w", power_w))
        if before is None or abs(g.cap_w - before) > 0.5:
            log.info(
                "round %d: %s cap %s -> %g W (%s)",
                self.rounds + 1,
                g.gpu_id,
                "?" if before is None else f"{before:g}",
                g.cap_w,
                f"job {g.job}, {g.load}" if g.job else "idle",
            )
        return True

    def enforce(self, target: Mapping[str, float]) -> None:
        """Lower first and wait for the nodes, then raise within what the budget leaves."""
        live = [g for g in self.gpus.values() if g.up and g.gpu_id in target]
        lowers = [g for g in live if target[g.gpu_id] <= (g.cap_w or g.max_w) + 1e-6]
        raises = [g for g in live if g not in lowers]
        for g in lowers:  # lowering and renewing never raise the sum
            self._cap(g, target[g.gpu_id])
        in_force = sum((g.cap_w if g.cap_w is not None else g.max_w) for g in self.gpus.values())
        room = self.budget_w - in_force
        unheard = sorted(n for n in self.nodes if n not in self.heard and n not in self.refusing)
        if unheard:  # their GPUs' caps are unknown: the sum in force cannot be bounded
            if unheard != self._unheard_said:
                log.warning(
                    "%s: never answered; no cap is raised until it does (its caps are unknown)",
                    ", ".join(unheard),
                )
            room = 0.0
        self._unheard_said = unheard
        for g in sorted(raises, key=lambda g: target[g.gpu_id] - (g.cap_w or 0)):
            now_w = g.cap_w if g.cap_w is not None else g.max_w
            give = min(target[g.gpu_id] - now_w, max(0.0, room))
            if give > 0.5:
                before = now_w
                self._cap(g, now_w + give)
                room -= (g.cap_w or before) - before
            else:
                self._cap(g, now_w)  # renew as it is

    def step(self) -> Dict[str, float]:
        """One round: read the cluster, split, enforce. Returns the targets."""
        with self._lock:
            self.poll()
            running = sorted(
                f"{g.gpu_id}=job {g.job} ({g.load})" for g in self.gpus.values() if g.job
            )
            if running != self._running:
                log.info("round %d: jobs: %s", self.rounds + 1, ", ".join(running) or "none")
                self._running = running
            target = self.plan()
            self.enforce(target)
            self.rounds += 1
            return target

    def snapshot(self) -> Dict[str, Any]:
        """What the metrics show: the budget and each GPU's cap, power, job and node state."""
        with self._lock:
            return {
                "budget_w": self.budget_w,
                "rounds": self.rounds,
                "gpus": [
                    {
                        "node": g.node,
                        "gpu": g.uri,
                        "uuid": g.uuid,
                        "job": g.job,
                        "cap_w": g.cap_w,
                        "power_w": g.power_w,
                        "up": g.up,
                    }
                    for g in self.gpus.values()
                ],
            }

    def start_check(self) -> None:
        """The first look at the cluster: refuses a budget below the least that works.

        Raises:
            BudgetTooSmallError: the budget is below the sum of the lowest caps.
            GovernorError: no node's daemon answers.
        """
        from governor.fleet.allocate import BudgetTooSmallError

        with self._lock:
            silent = self.poll()
        if self.refusing:
            raise GovernorError(
                "the daemon on " + ", ".join(sorted(self.refusing)) + " does not allow cap: "
                'add "cap" to allow in its config (governor-daemon.toml)'
            )
        if not self.gpus:
            where = ", ".join(silent) if silent else "no node in the partition"
            raise GovernorError(f"no GPU to cap: no node daemon answers ({where})")
        least = self.least_budget_w()
        if self.budget_w < least:
            raise BudgetTooSmallError(self.budget_w, least)

    def run(self) -> None:
        """A round every period, and one as soon as the running jobs change (Slurm is asked
        every :attr:`watch_s`), until :meth:`stop`."""
        watch_s = self.watch_s
        last_round = -float("inf")
        while not self._stop.is_set():
            started = time.monotonic()
            due = started - last_round >= self.period_s - 1e-3
            if not due:
                try:
                    due = self.slurm.jobs() != self._jobs_seen
                except GovernorError:
                    due = False
            if due:
                last_round = started
                try:
                    self.step()
                except GovernorError as err:
                    log.error("round failed: %s", err)
            self._stop.wait(max(0.0, watch_s - (time.monotonic() - started)))

    def stop(self) -> None:
        self._stop.set()


def socket_asker(
    template: str, timeout_s: float
) -> Callable[[str, Dict[str, Any]], Dict[str, Any]]:
    """``ask`` over each node's daemon socket (``template`` with ``{node}``)."""
    from governor.devices.daemon.client import DaemonClient

    def ask(node: str, request: Dict[str, Any]) -> Dict[str, Any]:
        client = DaemonClient(template.replace("{node}", node), timeout_s=timeout_s)
        doc = dict(request)
        return client.request(str(doc.pop("action")), **doc)

    return ask


def run_service(
    budget_w: float,
    partition: Optional[str] = None,
    period_s: float = 10.0,
    *,
    daemon_socket: str = DEFAULT_SOCKET_TEMPLATE,
    lease_s: Optional[float] = None,
    metrics_listen: Optional[str] = None,
    timeout_s: float = 2.0,
    say: Callable[[str], None] = print,
) -> int:
    """``governor cluster``: run the service until SIGTERM/SIGINT; returns the exit status.

    Raises:
        BudgetTooSmallError, GovernorError: refused at start (one line each).
    """
    if not (period_s > 0):
        raise InvalidRequestError(f"--period-s must be above 0, not {period_s:g}")
    if lease_s is not None and lease_s < period_s:
        raise InvalidRequestError(
            f"--lease-s {lease_s:g} is shorter than --period-s {period_s:g}: "
            "the leases would run out between two renewals"
        )
    if "{node}" not in daemon_socket:
        raise InvalidRequestError(
            f"--daemon-socket {daemon_socket!r} must contain {{node}} (the Slurm node name)"
        )
    service = ClusterService(
        budget_w,
        slurm=Slurm(partition, timeout_s=max(timeout_s, 5.0)),
        ask=socket_asker(daemon_socket, timeout_s),
        period_s=period_s,
        lease_s=lease_s,
        holder=f"governor-cluster pid {os.getpid()}",
    )
    service.start_check()  # a refusal is its one line, nothing logged before it
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    for g in service.gpus.values():  # what the nodes hold: where a restarted service starts
        log.info(
            "%s: %s (%s, %g-%g W) in force %s W",
            g.gpu_id,
            g.uuid,
            g.model,
            g.min_w,
            g.max_w,
            "?" if g.cap_w is None else f"{g.cap_w:g}",
        )
    metrics = None
    if metrics_listen:
        from governor.runtime.exporter import serve_cluster_metrics

        metrics = serve_cluster_metrics(service.snapshot, metrics_listen)
        say(f"governor cluster: metrics on http://{metrics.addr}:{metrics.port}/metrics")
    previous: Dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, lambda *_: service.stop())
    say(
        f"governor cluster: budget {budget_w:g} W over {len(service.gpus)} GPUs on "
        f"{len(service.nodes)} nodes (least {service.least_budget_w():g} W), "
        f"period {service.period_s:g} s, lease {service.lease_s:g} s"
    )
    try:
        service.run()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if metrics is not None:
            metrics.close()
    say("governor cluster: stopped; the nodes keep their caps until the leases run out")
    return 0
