"""A cluster of simulated GPUs under one power budget (W), in virtual time (1 s samples).

GPUs of several catalog boards run a mix of jobs that arrive and end at times drawn from a
seed, each on one GPU, queued (first come, first served) while none is free. The schedule
does not depend on the caps (a job runs for its drawn time), so every policy below runs the
very same jobs on the very same GPUs and their work can be compared directly:

- ``controller``: what ``governor cluster`` does. It rebalances every period and whenever a
  job starts or ends, splitting the budget with :func:`~governor.fleet.allocate.split_budget`
  over curves it learns per job (:class:`~governor.fleet.allocate.CurveLearner`) from what it
  measures: the mean cap, power and work rate of each GPU over the last period, with 1 %
  noise. It never sees the truth. A rebalance applies the caps that fall at once and the ones
  that rise one sample later, once the nodes have confirmed the falls, so the caps in force
  never sum above the budget.
- ``uniform``: the same cap on every GPU, budget / GPUs, clipped to each GPU's settable
  range (what an operator gets from ``nvidia-smi -pl`` with one figure everywhere: a GPU
  whose top cap is below the share leaves the difference unused).
- ``uniform_filled``: one level for every GPU, what a GPU cannot take shared by the others
  (a stronger static baseline than the issue's "budget / GPUs").
- ``proportional``: caps in proportion to each GPU's top cap (clipped, likewise shared).
- ``best_static``: the hindsight best static split: one cap per GPU for the whole run,
  chosen knowing every job that ran, its true curve and how long it computed; exact
  water-filling on each GPU's summed (time-weighted) true curve, whose hull value is an upper
  bound reported as ``work_best_static_bound``.

The truth: each job is a load between the board's compute- and memory-bound workloads
(:func:`~governor.fleet.allocate.load_curve`; ``compute`` jobs have a memory share in
0-0.15, ``memory`` 0.85-1, ``mixed`` 0.35-0.65) and ``bursty`` jobs compute (share 0-0.3)
in bursts separated by waits at idle power (duty 0.3-0.7, bursts of 20 s on average). Under
a cap a GPU draws at most the cap (capping holds within a sample), and on a wait its idle
power. Work is the catalog workloads' units (20 per second at the top clock on any board).
"""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Dict, Iterator, List, Optional, Sequence, Tuple

from governor.errors import InvalidRequestError
from governor.fleet.allocate import (
    CurveLearner,
    GpuDemand,
    LoadCurve,
    concave_hull,
    least_budget_w,
    load_curve,
    split_budget,
    work_at,
)

if TYPE_CHECKING:  # pragma: no cover
    from governor.devices.sim.physics import BoardSpec

__all__ = [
    "JOB_KINDS",
    "ClusterSimResult",
    "parse_counts",
    "simulate_cluster",
    "static_caps",
]

#: job kinds: (lowest, highest memory share, bursty)
JOB_KINDS: Dict[str, Tuple[float, float, bool]] = {
    "compute": (0.0, 0.15, False),
    "memory": (0.85, 1.0, False),
    "mixed": (0.35, 0.65, False),
    "bursty": (0.0, 0.3, True),
}
#: most GPUs and jobs in one simulation (a typo guard, and a few seconds of CPU)
MAX_GPUS = 1024
MAX_JOBS = 10000
#: mean length of a bursty job's burst (s)
BURST_MEAN_S = 20.0
#: relative noise of the controller's power and work measurements (one standard deviation)
MEASUREMENT_NOISE = 0.01


def parse_counts(spec: str, known: Sequence[str], what: str) -> List[Tuple[str, int]]:
    """``NAME:N,NAME:N`` (N a whole number >= 1) as [(name, n)], names in ``known``.

    Raises:
        InvalidRequestError: a malformed entry, an unknown name or a bad count (one line).
    """
    out: List[Tuple[str, int]] = []
    entries = [e.strip() for e in str(spec).split(",") if e.strip()]
    if not entries:
        raise InvalidRequestError(f"no {what} given: write NAME:COUNT,... (e.g. {known[0]}:4)")
    seen = set()
    for entry in entries:
        name, sep, count = entry.rpartition(":")
        if not sep:
            name, count = entry, "1"
        name = name.strip()
        if name not in known:
            raise InvalidRequestError(
                f"unknown {what} {name!r} in {spec!r}; known: {', '.join(known)}"
            )
        if name in seen:
            raise InvalidRequestError(f"{what} {name!r} is listed twice in {spec!r}")
        seen.add(name)
        try:
            n = int(count.strip())
        except ValueError:
            n = 0
        if n < 1:
            raise InvalidRequestError(
                f"the count of {what} {name!r} must be a whole number >= 1, not {count!r}"
            )
        out.append((name, n))
    return out


@dataclass(frozen=True)
class _Gpu:
    gpu_id: str
    board_name: str
    min_cap_w: float
    max_cap_w: float
    idle_w: float


@dataclass
class _Job:
    index: int
    kind: str
    memory_share: float
    arrive_s: int
    run_s: int
    #: seconds from its start at which the job switches between burst and wait (bursts first)
    toggles_s: Tuple[int, ...] = ()
    gpu: Optional[int] = None
    start_s: Optional[int] = None

    def computing(self, t_s: int) -> bool:
        """Whether the job computes during second ``t_s`` (it has started and not ended)."""
        assert self.start_s is not None
        return bisect.bisect_right(self.toggles_s, t_s - self.start_s) % 2 == 0


@dataclass(frozen=True)
class ClusterSimResult:
    """Total work (catalog work units) of the controller and of the static splits, and the
    peaks of the summed power and of the summed caps (W) over every 1 s sample."""

    work: float
    work_uniform: float
    work_uniform_filled: float
    work_proportional: float
    work_best_static: float
    work_best_static_bound: float
    work_oracle: float
    peak_power_w: float
    peak_caps_w: float
    budget_w: float
    least_budget_w: float
    top_power_w: float
    duration_s: float
    period_s: float
    seed: int
    gpus: Dict[str, int]
    jobs: Dict[str, int]
    jobs_run: int
    jobs_queued_at_end: int
    rebalances: int
    samples_over_budget: int

    def to_dict(self) -> Dict[str, object]:
        doc = asdict(self)
        w = self.work
        doc["vs_uniform"] = w / self.work_uniform if self.work_uniform > 0 else None
        doc["vs_uniform_filled"] = (
            w / self.work_uniform_filled if self.work_uniform_filled > 0 else None
        )
        doc["vs_proportional"] = w / self.work_proportional if self.work_proportional > 0 else None
        doc["vs_best_static"] = w / self.work_best_static if self.work_best_static > 0 else None
        return doc


@dataclass
class _World:
    gpus: List[_Gpu]
    jobs: List[_Job]
    truth: Dict[int, LoadCurve]  # job index -> its true curve on its GPU's board
    boards: Dict[str, BoardSpec] = field(default_factory=dict)


def _draw_jobs(job_counts: Sequence[Tuple[str, int]], duration_s: int, rng: random.Random):
    jobs: List[_Job] = []
    for kind, n in job_counts:
        lo, hi, bursty = JOB_KINDS[kind]
        for _ in range(n):
            arrive = int(rng.uniform(0.0, 0.5) * duration_s)
            run = max(1, int(rng.uniform(0.2, 0.6) * duration_s))
            toggles: List[int] = []
            if bursty:
                duty = rng.uniform(0.3, 0.7)
                k, on = 0.0, True
                while k < run:
                    mean = BURST_MEAN_S if on else BURST_MEAN_S * (1.0 - duty) / duty
                    k += max(1.0, rng.expovariate(1.0 / mean))
                    toggles.append(int(round(k)))
                    on = not on
            jobs.append(
                _Job(
                    index=len(jobs),
                    kind=kind,
                    memory_share=rng.uniform(lo, hi),
                    arrive_s=arrive,
                    run_s=run,
                    toggles_s=tuple(toggles),
                )
            )
    jobs.sort(key=lambda j: (j.arrive_s, j.index))
    return jobs


def _schedule(jobs: List[_Job], n_gpus: int, duration_s: int, rng: random.Random) -> None:
    """First come, first served: each job on a free GPU drawn at random, or queued."""
    free_at = [0] * n_gpus
    for job in jobs:  # in order of arrival
        t = max(job.arrive_s, min(free_at))
        if t >= duration_s:
            continue
        free = [g for g in range(n_gpus) if free_at[g] <= t]
        g = rng.choice(free)
        job.gpu, job.start_s = g, t
        free_at[g] = t + job.run_s


def _build(gpu_counts, job_counts, duration_s: int, seed: int) -> _World:
    from governor.devices.sim.catalog import get_board

    rng = random.Random(seed)
    gpus: List[_Gpu] = []
    boards: Dict[str, BoardSpec] = {}
    for name, n in gpu_counts:
        board = boards.get(name) or get_board(name)
        boards[name] = board
        idle = load_curve(board, 0.0).idle_w
        lo, hi = board.power_limit_range_w or (board.power_limit_w, board.power_limit_w)
        for _ in range(n):
            k = len(gpus)
            gpus.append(_Gpu(f"node{k // 8}/{k % 8}", name, lo, hi, idle))
    jobs = _draw_jobs(job_counts, duration_s, rng)
    _schedule(jobs, len(gpus), duration_s, rng)
    truth: Dict[int, LoadCurve] = {}
    cache: Dict[Tuple[str, float], LoadCurve] = {}
    for job in jobs:
        if job.gpu is None:
            continue
        key = (gpus[job.gpu].board_name, job.memory_share)
        if key not in cache:
            cache[key] = load_curve(boards[key[0]], job.memory_share)
        truth[job.index] = cache[key]
    return _World(gpus, jobs, truth, boards)


def _events(world: _World, duration_s: int) -> Dict[int, List[Tuple[str, _Job]]]:
    out: Dict[int, List[Tuple[str, _Job]]] = {}
    for job in world.jobs:
        if job.start_s is None:
            continue
        out.setdefault(job.start_s, []).append(("start", job))
        end = job.start_s + job.run_s
        if end < duration_s:
            out.setdefault(end, []).append(("end", job))
    return out


def _seconds(
    world: _World, duration_s: int
) -> Iterator[Tuple[int, Dict[int, _Job], List[_Job], List[_Job]]]:
    """Each second ``t`` of the schedule: the jobs running (by GPU) once that second's jobs
    ended and started (ends first, so that a GPU freed and taken in one second holds the new
    job), and the jobs that ended and started in it."""
    events = _events(world, duration_s)
    running: Dict[int, _Job] = {}
    for t in range(duration_s):
        ended = [job for what, job in events.get(t, ()) if what == "end"]
        started = [job for what, job in events.get(t, ()) if what == "start"]
        for job in ended:
            running.pop(job.gpu, None)  # type: ignore[arg-type]
        for job in started:
            running[job.gpu] = job  # type: ignore[index]
        yield t, running, ended, started


class _Run:
    """One policy over the world's schedule: its work, and the peaks of power and caps."""

    def __init__(self, world: _World, budget_w: float, caps: Dict[str, float]) -> None:
        self.world = world
        self.budget_w = budget_w
        self.caps = dict(caps)  # in force
        self.work = 0.0
        self.peak_power_w = 0.0
        self.peak_caps_w = 0.0
        self.over = 0
        self.memo: Dict[Tuple[int, float], Tuple[float, float]] = {}

    def sample(self, t_s: int, running: Dict[int, _Job]):
        """Second ``t_s``: each GPU's (cap, power, work per second), and the peaks updated."""
        out = []
        total_w = 0.0
        memo = self.memo
        for g, gpu in enumerate(self.world.gpus):
            cap = self.caps[gpu.gpu_id]
            job = running.get(g)
            if job is not None and job.computing(t_s):
                key = (job.index, cap)
                known = memo.get(key)
                if known is None:
                    if len(memo) > 100000:
                        memo.clear()
                    truth = self.world.truth[job.index]
                    known = memo[key] = (truth.power_w(cap), truth.work_per_s(cap))
                power, rate = known
            else:
                power, rate = min(cap, gpu.idle_w), 0.0
            self.work += rate
            total_w += power
            out.append((cap, power, rate))
        caps_w = sum(self.caps.values())
        self.peak_power_w = max(self.peak_power_w, total_w)
        self.peak_caps_w = max(self.peak_caps_w, caps_w)
        if total_w > self.budget_w * (1 + 1e-9) or caps_w > self.budget_w * (1 + 1e-9):
            self.over += 1
        return out


def _run_static(world: _World, budget_w: float, caps: Dict[str, float], duration_s: int) -> _Run:
    run = _Run(world, budget_w, caps)
    for t, running, _, _ in _seconds(world, duration_s):
        run.sample(t, running)
    return run


def _run_controller(
    world: _World, budget_w: float, duration_s: int, period_s: int, seed: int
) -> Tuple[_Run, int]:
    gpus = world.gpus
    noise = random.Random(seed + 7919)
    floor = {g.gpu_id: g.min_cap_w for g in gpus}
    run = _Run(world, budget_w, floor)
    learners: Dict[int, CurveLearner] = {}
    # what was measured since the last rebalance, per GPU: seconds, sum of cap, power, work
    window = [[0, 0.0, 0.0, 0.0] for _ in gpus]
    pending: Dict[str, float] = {}  # raises waiting for the falls to be confirmed
    last = -period_s
    rebalances = 0
    for t, running, ended, started in _seconds(world, duration_s):
        if pending:  # the nodes confirmed last second's falls: now the raises
            run.caps.update(pending)
            pending = {}
        for job in ended:
            learners.pop(job.gpu, None)  # type: ignore[arg-type]
            window[job.gpu] = [0, 0.0, 0.0, 0.0]  # type: ignore[index]
        for job in started:
            g = job.gpu
            assert g is not None
            learners[g] = CurveLearner(world.boards[gpus[g].board_name])
            window[g] = [0, 0.0, 0.0, 0.0]
        if ended or started or t - last >= period_s:
            for g, learner in learners.items():
                n, cap_s, power_s, work_s = window[g]
                if n:
                    learner.observe(cap_s / n, power_s / n, work_s / n)
                window[g] = [0, 0.0, 0.0, 0.0]
            demands = [
                GpuDemand(
                    gpu_id=gpu.gpu_id,
                    min_cap_w=gpu.min_cap_w,
                    max_cap_w=gpu.max_cap_w,
                    busy=g in running,
                    work_at_cap=learners[g].curve() if g in learners else (),
                )
                for g, gpu in enumerate(gpus)
            ]
            target = split_budget(demands, budget_w)
            for gpu_id, cap in target.items():
                if cap <= run.caps[gpu_id]:
                    run.caps[gpu_id] = cap  # falls first
                else:
                    pending[gpu_id] = cap
            last = t
            rebalances += 1
        for g, (cap, power, rate) in enumerate(run.sample(t, running)):
            if g in running:
                w = window[g]
                w[0] += 1
                w[1] += cap
                w[2] += power * (1.0 + noise.gauss(0.0, MEASUREMENT_NOISE))
                w[3] += rate * (1.0 + noise.gauss(0.0, MEASUREMENT_NOISE))
    return run, rebalances


def _fill(lo: Sequence[float], hi: Sequence[float], weight: Sequence[float], budget_w: float):
    """Caps ``clip(level·weight, lo, hi)`` with the level that makes them sum to the budget
    (or every GPU at its top cap when the budget exceeds their sum)."""
    if sum(hi) <= budget_w:
        return list(hi)

    def caps(level: float) -> List[float]:
        return [min(h, max(lo_, level * w)) for lo_, h, w in zip(lo, hi, weight)]

    a, b = 0.0, max(h / w for h, w in zip(hi, weight))
    for _ in range(200):
        mid = (a + b) / 2
        if sum(caps(mid)) > budget_w:
            b = mid
        else:
            a = mid
    return caps(a)


def _uniform(lo: Sequence[float], hi: Sequence[float], budget_w: float) -> List[float]:
    """budget / GPUs on every GPU, clipped to its range; where lowest caps lift some GPUs
    above that share, the others' share is lowered until the sum fits. Watts a GPU cannot
    take (its top cap is below the share) are not handed to the others."""
    n = len(lo)

    def caps(level: float) -> List[float]:
        return [min(h, max(lo_, level)) for lo_, h in zip(lo, hi)]

    a, b = 0.0, budget_w / n
    if sum(caps(b)) <= budget_w:
        return caps(b)
    for _ in range(200):
        mid = (a + b) / 2
        if sum(caps(mid)) > budget_w:
            b = mid
        else:
            a = mid
    return caps(a)


def static_caps(gpus: Sequence[_Gpu], budget_w: float, how: str) -> Dict[str, float]:
    """A static split within each GPU's range: ``uniform`` (budget / GPUs, see
    :func:`_uniform`), ``uniform_filled`` (one level for all, what a GPU cannot take shared
    by the others) or ``proportional`` (to each GPU's top cap, likewise filled)."""
    lo = [g.min_cap_w for g in gpus]
    hi = [g.max_cap_w for g in gpus]
    if how == "uniform":
        caps = _uniform(lo, hi, budget_w)
    else:
        weight = [1.0] * len(gpus) if how == "uniform_filled" else [g.max_cap_w for g in gpus]
        caps = _fill(lo, hi, weight, budget_w)
    return {g.gpu_id: c for g, c in zip(gpus, caps)}


def _run_oracle(world: _World, budget_w: float, duration_s: int) -> _Run:
    """A bound on any controller: the true curves, split again whenever the set of GPUs
    that compute changes (a job starts, ends, or a burst starts or ends), applied at once."""
    gpus = world.gpus
    run = _Run(world, budget_w, {g.gpu_id: g.min_cap_w for g in gpus})
    computing: Tuple[int, ...] = ()
    for t, running, _, _ in _seconds(world, duration_s):
        now = tuple(sorted(g for g, job in running.items() if job.computing(t)))
        if now != computing or t == 0:
            computing = now
            demands = [
                GpuDemand(
                    gpu.gpu_id,
                    gpu.min_cap_w,
                    gpu.max_cap_w,
                    g in computing,
                    world.truth[running[g].index].curve() if g in computing else (),
                )
                for g, gpu in enumerate(gpus)
            ]
            run.caps.update(split_budget(demands, budget_w))
        run.sample(t, running)
    return run


def _best_static(world: _World, budget_w: float, duration_s: int) -> Tuple[Dict[str, float], float]:
    """The hindsight best static split (exact on each GPU's summed true curve, from its
    concave hull) and the hull's total work, an upper bound of any static split's."""
    per_gpu: Dict[int, List[Tuple[float, LoadCurve]]] = {}
    for job in world.jobs:
        if job.start_s is None or job.gpu is None:
            continue
        end = min(duration_s, job.start_s + job.run_s)
        busy_s = sum(1 for t in range(job.start_s, end) if job.computing(t))
        if busy_s:
            per_gpu.setdefault(job.gpu, []).append((float(busy_s), world.truth[job.index]))
    demands = []
    hulls: Dict[str, Tuple[Tuple[float, float], ...]] = {}
    for g, gpu in enumerate(world.gpus):
        parts = per_gpu.get(g, [])
        grid = {gpu.min_cap_w, gpu.max_cap_w}
        for _, truth in parts:
            grid.update(p for p, _ in truth.points if gpu.min_cap_w < p < gpu.max_cap_w)
            if gpu.min_cap_w < truth.idle_w < gpu.max_cap_w:
                grid.add(truth.idle_w)
        curve = tuple((c, sum(s * truth.work_per_s(c) for s, truth in parts)) for c in sorted(grid))
        demands.append(GpuDemand(gpu.gpu_id, gpu.min_cap_w, gpu.max_cap_w, bool(parts), curve))
        hulls[gpu.gpu_id] = concave_hull(curve, gpu.min_cap_w, gpu.max_cap_w)
    caps = split_budget(demands, budget_w)
    bound = sum(work_at(hulls[gid], c) for gid, c in caps.items())
    return caps, bound


def simulate_cluster(
    gpus: Sequence[Tuple[str, int]],
    jobs: Sequence[Tuple[str, int]],
    budget_w: float,
    duration_s: float,
    seed: int = 0,
    period_s: float = 10.0,
    oracle: bool = False,
) -> ClusterSimResult:
    """Run the controller and the static splits over one drawn cluster and job mix.

    ``gpus``: (catalog board, count); ``jobs``: (kind in :data:`JOB_KINDS`, count).
    ``oracle`` also runs the bound of any controller (``work_oracle``; NaN when not run): the
    true curves, split again whenever a job or a burst starts or ends.

    Raises:
        InvalidRequestError: a bad count, duration or period (one line).
        DeviceNotFoundError: an unknown board.
        BudgetTooSmallError: ``budget_w`` below the sum of the GPUs' lowest caps.
    """
    n_gpus = sum(n for _, n in gpus)
    n_jobs = sum(n for _, n in jobs)
    if not 1 <= n_gpus <= MAX_GPUS:
        raise InvalidRequestError(f"the cluster needs 1 to {MAX_GPUS} GPUs, not {n_gpus}")
    if not 1 <= n_jobs <= MAX_JOBS:
        raise InvalidRequestError(f"the mix needs 1 to {MAX_JOBS} jobs, not {n_jobs}")
    for kind, _ in jobs:
        if kind not in JOB_KINDS:
            raise InvalidRequestError(f"unknown job kind {kind!r}; known: {', '.join(JOB_KINDS)}")
    if not (math.isfinite(duration_s) and 1 <= duration_s <= 7 * 86400):
        raise InvalidRequestError(f"duration must be 1 s to a week, not {duration_s:g} s")
    if not (math.isfinite(period_s) and 1 <= period_s <= 3600):
        raise InvalidRequestError(f"period must be 1 s to an hour, not {period_s:g} s")
    duration = int(duration_s)
    world = _build(gpus, jobs, duration, seed)
    floor = [GpuDemand(g.gpu_id, g.min_cap_w, g.max_cap_w, False) for g in world.gpus]
    least = least_budget_w(floor)
    split_budget(floor, budget_w)  # refuses a budget below the least, with the least in words
    controller, rebalances = _run_controller(world, budget_w, duration, int(period_s), seed)
    uniform = _run_static(world, budget_w, static_caps(world.gpus, budget_w, "uniform"), duration)
    filled = _run_static(
        world, budget_w, static_caps(world.gpus, budget_w, "uniform_filled"), duration
    )
    proportional = _run_static(
        world, budget_w, static_caps(world.gpus, budget_w, "proportional"), duration
    )
    best_caps, bound = _best_static(world, budget_w, duration)
    best = _run_static(world, budget_w, best_caps, duration)
    work_oracle = _run_oracle(world, budget_w, duration).work if oracle else math.nan
    return ClusterSimResult(
        work=controller.work,
        work_uniform=uniform.work,
        work_uniform_filled=filled.work,
        work_proportional=proportional.work,
        work_best_static=best.work,
        work_best_static_bound=bound,
        work_oracle=work_oracle,
        peak_power_w=controller.peak_power_w,
        peak_caps_w=controller.peak_caps_w,
        budget_w=float(budget_w),
        least_budget_w=least,
        top_power_w=float(sum(g.max_cap_w for g in world.gpus)),
        duration_s=float(duration),
        period_s=float(int(period_s)),
        seed=seed,
        gpus=dict(gpus),
        jobs=dict(jobs),
        jobs_run=sum(1 for j in world.jobs if j.start_s is not None),
        jobs_queued_at_end=sum(1 for j in world.jobs if j.start_s is None),
        rebalances=rebalances,
        samples_over_budget=controller.over,
    )
