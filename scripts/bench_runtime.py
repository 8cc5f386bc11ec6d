"""Bench of the runtime governor on simulated boards (issue 7 targets; not a timed test).

    python scripts/bench_runtime.py [--boards a,b] [--quick]

Each board is first calibrated (as a user would with ``governor calibrate``), then:

- power cap at 70 % of the board's compute power at the top clock, over steady, bursty and
  step traces (120 s): time above the cap (1-s average) and mean power while demand exceeds
  the cap; targets <= 2 % and >= 90 %;
- battery (board scope): a budget 60 % of the way from what the lowest clock to what the top
  clock uses at the board's input in a 600 s mission, over steady, bursty and step traces:
  how long it lasted, board-input energy against the budget (target <= 1.01) and work done
  against the best constant clock that fits the budget (brute-forced by bisection; target
  >= 1, and >= 1.03 on average), once with a job that does not tick and once with one that
  reports its work with ``gov.tick`` (``--battery-ticks no|yes|both``; ``--seed`` for the
  bursty trace; ``--baseline-cache FILE`` keeps the calibrated profiles and the baselines,
  which do not depend on the controllers, between runs, keyed by a hash of the simulator's,
  calibration's and profiles' sources);
- battery on the step trace's siblings (``siblings``): the traces ``memory`` and
  ``memory-compute``, which a policy cannot tell from ``step`` until a third (two thirds)
  of the mission has run, on the step trace's budget: the price of forecasting the step;
- throughput: the 30 Hz perception trace (60 s): missed deadlines (target <= 1 %) and energy
  against the cheapest constant clock that misses no more than the policy's late-frame
  allowance (``frames.LATE_ALLOWANCE``), or than the policy did where that is more (target
  <= 1.002);
- throughput with a battery floor: the same loop with a budget above and below what the
  throughput policy alone uses: the rate holds on the first, the budget on the second
  (board energy <= budget + 1 % wherever the board idling alone fits the budget), the app
  skipping the frames ``gov.admit()`` refuses, and an app that does not ask
  (``--floor-seeds 0,1,2`` runs the table on each seed and prints the worst per seed;
  ``--frame-rate-hz`` / ``--frame-load`` set the camera for this section too);
- overhead: median time of one control step (device read included), CPU share at 10 Hz in
  real time, RSS a running governor adds, and whether scipy or numpy got imported.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import inspect
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

os.environ.setdefault("GOVERNOR_STATE_DIR", tempfile.mkdtemp(prefix="governor-bench-state-"))
os.environ.setdefault("GOVERNOR_DATA_DIR", tempfile.mkdtemp(prefix="governor-bench-data-"))

import logging  # noqa: E402

logging.getLogger("governor.runtime").addHandler(logging.NullHandler())

import governor  # noqa: E402
from governor.devices.sim.catalog import board_names  # noqa: E402
from governor.runtime.simulate import simulate  # noqa: E402

CAP_TRACES = ("steady", "bursty", "step")


def calibrated(board: str):
    from governor.calibrate.loads import make_load
    from governor.calibrate.procedure import DeviceProber, calibrate
    from governor.profiles.profile import build_profile

    with governor.open_device(f"sim:{board}") as dev:
        load = make_load(dev, "builtin")
        return build_profile(
            dev, calibrate(DeviceProber(dev, load)), {"kind": load.kind, "name": load.name}
        )


def constant(board, doc, clock, trace, duration, scope=None, seed=0):
    return simulate(
        board,
        {"policy": "clock", "clock_mhz": clock},
        trace,
        duration,
        profile=doc,
        scope=scope,
        seed=seed,
    )


def core_only(board):
    """``simulate``'s keywords that pin a board's memory clock at its default where it has
    several: the throughput and floor sections compare the core clock's policy with
    constant core clocks (the memory knob's figures are ``scripts/bench_mem_throughput.py``'s)."""
    dev = governor.open_device(f"sim:{board}")
    if len(dev.supported_mem_clocks_mhz()) > 1:
        return {"mem_clock_mhz": dev.sample().mem_clock_mhz}
    return {}


def best_lasting_clock(board, doc, clocks, trace, duration, budget, scope="board", seed=0):
    """Highest clock whose constant run fits the budget on ``scope`` (energy rises with the
    clock), brute-forced by bisection over the table."""
    lo, hi, best = 0, len(clocks) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        run = constant(board, doc, clocks[mid], trace, duration, scope, seed)
        if run["energy_j"] <= budget:
            best, lo = run, mid + 1
        else:
            hi = mid - 1
    return best


def best_rate_clock(board, doc, clocks, duration, seed=0, allowance=None, runs=None):
    """Cheapest constant clock missing at most ``allowance`` of the frames: by default the
    throughput policy's own late-frame allowance (``frames.LATE_ALLOWANCE``, read from the
    library), so that the policy and this hindsight yardstick are held to the same late-frame
    rate. ``runs`` (clock index -> run) keeps the constant runs between calls."""
    from governor.runtime.throughput_parts.frames import LATE_ALLOWANCE

    share = LATE_ALLOWANCE if allowance is None else allowance
    runs = {} if runs is None else runs

    def run_at(i):
        if i not in runs:
            runs[i] = constant(board, doc, clocks[i], "perception-30hz", duration, seed=seed)
        return runs[i]

    lo, hi, first = 0, len(clocks) - 1, None
    while lo <= hi:  # lowest clock that keeps up
        mid = (lo + hi) // 2
        run = run_at(mid)
        if run["deadline_misses"] <= share * run["frames"]:
            first, hi = (mid, run), mid - 1
        else:
            lo = mid + 1
    if first is None:
        return None
    best = first[1]
    for i in range(first[0] + 1, len(clocks)):  # energy may still fall above it (idle power)
        run = run_at(i)
        if run["energy_j"] >= best["energy_j"]:
            break
        best = run
    return best


def bench_cap(boards, docs, duration):
    rows = []
    for board in boards:
        top = simulate(board, {"policy": "max"}, "steady", 20, profile=docs[board])["mean_power_w"]
        cap = 0.7 * top
        for trace in CAP_TRACES:
            r = simulate(
                board, {"policy": "power-cap", "cap_w": cap}, trace, duration, profile=docs[board]
            )
            above = 100.0 * r["time_above_cap_s"] / r["duration_s"]
            mean = 100.0 * (r["mean_power_while_demand_w"] or 0.0) / cap
            ok = above <= 2.0 and mean >= 90.0
            rows.append(
                (
                    board,
                    trace,
                    cap,
                    above,
                    mean,
                    100.0 * r["time_above_cap_instant_s"] / r["duration_s"],
                    ok,
                )
            )
    print(f"\n## Power cap at 70 % of top-clock power, {duration:.0f} s per trace")
    print(
        "| board | trace | cap W | above cap (1-s avg) % | mean power while demand > cap, % of cap | periods above cap % | ok |"
    )
    print("|---|---|---:|---:|---:|---:|:-:|")
    for board, trace, cap, above, mean, inst, ok in rows:
        print(
            f"| {board} | {trace} | {cap:.1f} | {above:.2f} | {mean:.1f} | {inst:.0f} | {'yes' if ok else 'NO'} |"
        )
    print(f"{sum(r[-1] for r in rows)}/{len(rows)} within both targets")


BATTERY_TRACES = ("steady", "bursty", "step")


def _phase_points(spec, workload):
    """(board W, work units/s) at every table clock for one phase (None: idle), in thermal
    steady state; clocks whose power the firmware would throttle are left out (their place
    is taken by the clock it throttles to)."""
    mem = spec.default_mem_clock_mhz
    points = []
    for f in spec.clocks_mhz:
        gpu = spec.steady_gpu_power_w(f, workload, mem)
        if workload is not None and spec.limited_power_w(gpu) > spec.power_limit_w:
            continue
        rate = 1.0 / workload.time_per_unit_s(f, mem) if workload is not None else 0.0
        points.append((spec.board_power_w(gpu), rate))
    return points


def _upper_hull(points):
    """The upper concave envelope of (power, work rate) from the least-power point:
    what time-sharing two clocks reaches; a list of vertices, power rising."""
    pts = sorted(set(points))
    start = min(pts, key=lambda p: (p[0], -p[1]))
    pts = [p for p in pts if p[0] >= start[0]]
    hull = []
    for p in pts:
        if hull and p[1] <= hull[-1][1]:
            continue  # more power, no more work: never on the envelope
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            if (y2 - y1) * (p[0] - x1) <= (p[1] - y1) * (x2 - x1):
                hull.pop()  # the middle vertex lies under the chord
            else:
                break
        hull.append(p)
    return hull


def fill_envelopes(hulls, secs, energy_j):
    """Hindsight's spend of ``energy_j`` over phases of ``secs`` seconds each (name -> s),
    each on its upper envelope ``hulls[name]`` ([(power W, work/s)], least power first):
    every phase at its least-power point, then the envelopes' segments in the order of work
    per joule (the greedy order of slopes is the Lagrange solution). Returns (the least
    energy the phases can run on, the work done)."""
    base_j = base_work = 0.0
    steps = []
    for name, s in secs.items():
        hull = hulls[name]
        base_j += s * hull[0][0]
        base_work += s * hull[0][1]
        for (p1, w1), (p2, w2) in zip(hull, hull[1:]):
            steps.append(((w2 - w1) / (p2 - p1), s * (p2 - p1), s * (w2 - w1)))
    left = energy_j - base_j
    work = base_work
    for _slope, cost_j, gain in sorted(steps, reverse=True):
        if left <= 0:
            break
        take = min(1.0, left / cost_j)
        work += take * gain
        left -= take * cost_j
    return base_j, work


def battery_oracle(board, trace, duration, budget_j, seed=0):
    """The most work any clock schedule with full hindsight does within ``budget_j`` (board
    input) over the trace, from the simulator's physics in thermal steady state: each phase
    on the upper concave envelope of work rate vs power over the clock table (time-sharing
    two clocks), idle at the cheapest clock, the budget spread across phases where a joule
    buys the most work (equal marginal work per joule: the greedy order of envelope slopes
    is the Lagrange solution). Returns (oracle work, best constant clock's work under the
    same physics), so their ratio is free of the steady-state approximation's bias."""
    from governor.devices.sim.catalog import get_board
    from governor.runtime.simulate import trace_segments

    spec = get_board(board)
    segments = trace_segments(trace, duration, seed)
    phase_s = {}
    for k, (start, name) in enumerate(segments):
        end = segments[k + 1][0] if k + 1 < len(segments) else duration
        phase_s[name] = phase_s.get(name, 0.0) + max(0.0, min(end, duration) - start)
    points = {name: _phase_points(spec, spec.workloads[name] if name else None) for name in phase_s}
    # the oracle: everything at its least-power point, then envelope segments by slope
    hulls = {name: _upper_hull(points[name]) if name else [min(points[name])] for name in phase_s}
    _least_j, work = fill_envelopes(hulls, phase_s, budget_j)
    # the best constant clock under the same physics (idle at that clock too)
    best_const = 0.0
    mem = spec.default_mem_clock_mhz
    for f in spec.clocks_mhz:
        e = w = 0.0
        for name, secs in phase_s.items():
            load = spec.workloads[name] if name else None
            gpu = spec.steady_gpu_power_w(f, load, mem)
            e += secs * spec.board_power_w(gpu)
            w += secs * (1.0 / load.time_per_unit_s(f, mem) if load is not None else 0.0)
        if e <= budget_j:
            best_const = max(best_const, w)
    return work, best_const


class _TickingApp:
    """The simulated job reports its progress as an app in the documented loop does: before
    each control step, ``gov.tick(n)`` for the ``n`` whole units finished since the last
    one (a unit is 50 ms of work at the top clock, like a frame or a batch), so the count
    carries the quantisation a real app's has. Installed by patching the Governor class the
    simulator builds (the simulator's own job does not tick)."""

    def __enter__(self):
        import math

        import governor.runtime.simulate as sim_mod

        base = sim_mod.Governor

        class Ticking(base):
            def step(self, advance_s=None):
                done = math.floor(self.device.work_done())
                new = done - getattr(self, "_bench_ticked", 0)
                if new > 0:
                    self.tick(float(new))
                self._bench_ticked = done
                return super().step(advance_s)

        self._mod, self._base = sim_mod, base
        sim_mod.Governor = Ticking
        return self

    def __exit__(self, *exc):
        self._mod.Governor = self._base
        return False


# what the battery baselines (calibrated profiles, budgets, best constant clocks, oracle)
# are computed by: a change to any of it invalidates a --baseline-cache file. The fits
# (governor/models) make the profiles; a constant clock runs through the governor's loop.
BASELINE_SOURCES = (
    "governor/devices/sim",
    "governor/devices/base.py",
    "governor/calibrate",
    "governor/models",
    "governor/profiles",
    "governor/runtime/simulate.py",
    "governor/runtime/governor.py",
    "governor/runtime/telemetry.py",
    "governor/runtime/model.py",
)


def baseline_code_hash(root=REPO, sources=BASELINE_SOURCES) -> str:
    """SHA-256 over the simulator's, calibration's and profiles' sources under ``root`` and
    the bench's own baseline functions: the key a baseline cache is valid for."""
    digest = hashlib.sha256()
    for src in sources:
        path = Path(root) / src
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        for f in files:
            digest.update(f.relative_to(root).as_posix().encode() + b"\0")
            digest.update(f.read_bytes() + b"\0")
    for fn in (
        calibrated,
        constant,
        best_lasting_clock,
        battery_oracle,
        _phase_points,
        _upper_hull,
        battery_baselines,  # the budget rule
        sibling_baselines,
    ):
        digest.update(inspect.getsource(fn).encode())
    return digest.hexdigest()


class BaselineCache:
    """The battery section's baselines, which do not depend on the controllers' code:
    calibrated profiles per board, and per board, trace, seed, scope and duration the
    budget, the best constant clock's work and the oracle. Kept in a JSON file
    (``--baseline-cache``) under the hash of the code that computes them
    (:func:`baseline_code_hash`); a file made by other code, of another format or not
    readable is rebuilt (said on stderr), an entry that is not well formed is recomputed.
    Without a path nothing is kept between runs."""

    VERSION = 1
    BATTERY_KEYS = ("budget_j", "best_work", "best_clock_mhz", "oracle_work", "oracle_const")

    def __init__(self, path=None, code=None):
        self.path = Path(path) if path else None
        self.code = code if code is not None else baseline_code_hash()
        self.profiles = {}
        self.battery = {}
        self.rebuilt = None  # why the file was not used, if it was not
        if self.path is None or not self.path.exists():
            return
        try:
            raw = json.loads(self.path.read_text())
        except (OSError, ValueError) as err:
            self.rebuilt = f"not readable ({type(err).__name__})"
        else:
            if not isinstance(raw, dict) or raw.get("version") != self.VERSION:
                self.rebuilt = "not a baseline cache of this version"
            elif raw.get("code") != self.code:
                self.rebuilt = "made by other simulator or calibration code"
            else:
                profiles, battery = raw.get("profiles"), raw.get("battery")
                self.profiles = dict(profiles) if isinstance(profiles, dict) else {}
                self.battery = dict(battery) if isinstance(battery, dict) else {}
        if self.rebuilt:
            print(f"baseline cache {self.path}: {self.rebuilt}; rebuilding it", file=sys.stderr)

    def save(self) -> None:
        if self.path is None:
            return
        data = {
            "version": self.VERSION,
            "code": self.code,
            "profiles": self.profiles,
            "battery": self.battery,
        }
        tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, self.path)

    def profile(self, board, make=None):
        """The board's calibrated profile (``make(board)``, default :func:`calibrated`),
        through JSON either way, so a cached run and a fresh one see the same document."""
        doc = self.profiles.get(board)
        if not (isinstance(doc, dict) and doc.get("board") == board):
            doc = json.loads(json.dumps((make or calibrated)(board)))
            self.profiles[board] = doc
            self.save()
        return doc

    @staticmethod
    def battery_key(board, trace, seed, scope, duration) -> str:
        return f"{board}|{trace}|{seed}|{scope}|{duration:g}"

    def _valid(self, row) -> bool:
        if not isinstance(row, dict):
            return False
        for k in self.BATTERY_KEYS:
            x = row.get(k)
            if x is None and k in ("best_work", "best_clock_mhz"):
                continue  # no constant clock lasts
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
                return False
        return row["budget_j"] > 0

    def battery_baseline(self, key, make):
        """The battery baselines under ``key`` (see :meth:`battery_key`), ``make()`` when
        absent or not well formed."""
        row = self.battery.get(key)
        if not self._valid(row):
            row = make()
            self.battery[key] = row
            self.save()
        return row


def battery_baselines(board, doc, trace, duration, scope="board", seed=0):
    """Budget (60 % of the way from the lowest clock's energy to the top clock's on
    ``scope``), the best constant clock that lasts, and the oracle, for one mission."""
    clocks = governor.open_device(f"sim:{board}").supported_clocks_mhz()
    top = constant(board, doc, clocks[-1], trace, duration, scope, seed)
    low = constant(board, doc, clocks[0], trace, duration, scope, seed)
    budget = low["energy_j"] + 0.6 * (top["energy_j"] - low["energy_j"])
    return sibling_baselines(board, doc, trace, duration, budget, scope, seed)


def sibling_baselines(board, doc, trace, duration, budget_j, scope="board", seed=0):
    """The best constant clock that lasts and the oracle for one mission on a budget given
    (the step trace's, for the traces a policy cannot tell from it at first; the bench's
    own rule's, for its traces)."""
    clocks = governor.open_device(f"sim:{board}").supported_clocks_mhz()
    best = best_lasting_clock(board, doc, clocks, trace, duration, budget_j, scope, seed)
    oracle_work, oracle_const = battery_oracle(board, trace, duration, budget_j, seed)
    return {
        "budget_j": budget_j,
        "best_work": best["work_done"] if best else None,
        "best_clock_mhz": best["mean_clock_mhz"] if best else None,
        "oracle_work": oracle_work,
        "oracle_const": oracle_const,
    }


# the step trace's siblings: memory-bound all along, and memory-bound then compute-bound
# from a third on; a policy sees the same load as on the step trace until a third (two
# thirds) of the mission has run, so they share its budget
SIBLING_TRACES = ("memory", "memory-compute")


def bench_battery(
    boards, docs, duration, scope="board", ticks=False, seed=0, cache=None, siblings=False
):
    """Budget between what the lowest and the top clock use on ``scope``: 60 % of the way.
    ``ticks``: the job reports its work with ``gov.tick`` (see :class:`_TickingApp`);
    ``cache``: a :class:`BaselineCache` for the baselines (default: computed here);
    ``siblings``: the traces of ``SIBLING_TRACES`` on the step trace's budget instead."""
    import contextlib

    cache = cache if cache is not None else BaselineCache()
    print(
        f"\n## Battery ({scope} scope): budget = lowest-clock energy + 60 % of the way to "
        + ("top-clock energy on the step trace" if siblings else "top-clock energy")
        + f", {duration:.0f} s, "
        + ("the job ticks its work (gov.tick per unit)" if ticks else "the job does not tick")
        + (f", trace seed {seed}" if seed else "")
    )
    print(
        "| board | trace | budget J | lasted % | board energy vs budget | energy left % | "
        "work vs best constant clock that lasts | that clock MHz | oracle vs best constant | "
        "policy / oracle | constant / oracle |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    ratios, over, gains = [], [], []
    for board in boards:
        doc = docs[board]
        for trace in SIBLING_TRACES if siblings else BATTERY_TRACES:
            if siblings:
                step = cache.battery_baseline(
                    cache.battery_key(board, "step", seed, scope, duration),
                    functools.partial(battery_baselines, board, doc, "step", duration, scope, seed),
                )
                make = functools.partial(
                    sibling_baselines, board, doc, trace, duration, step["budget_j"], scope, seed
                )
                key = cache.battery_key(board, f"{trace}@step", seed, scope, duration)
            else:
                make = functools.partial(
                    battery_baselines, board, doc, trace, duration, scope, seed
                )
                key = cache.battery_key(board, trace, seed, scope, duration)
            base = cache.battery_baseline(key, make)
            budget = base["budget_j"]
            with _TickingApp() if ticks else contextlib.nullcontext():
                r = simulate(
                    board,
                    {
                        "policy": "battery",
                        "energy_j": budget,
                        "duration_s": duration,
                        "scope": scope,
                    },
                    trace,
                    duration,
                    profile=doc,
                    seed=seed,
                )
            best_work = base["best_work"]
            ratio = r["work_done"] / best_work if best_work else float("nan")
            clock = base["best_clock_mhz"]
            clock = float("nan") if clock is None else clock
            oracle_const = base["oracle_const"]
            gain = base["oracle_work"] / oracle_const if oracle_const > 0 else float("nan")
            ratios.append(ratio)
            gains.append(gain)
            over.append(r["board_energy_j"] / budget)
            print(
                f"| {board} | {trace} | {budget:.0f} | {100 * r['lasted_s'] / duration:.1f} | "
                f"{r['board_energy_j'] / budget:.3f} | "
                f"{100 * r['energy_left_j'] / budget:.1f} | {ratio:.4f} | {clock:.0f} | "
                f"{gain:.3f} | {ratio / gain:.3f} | {1.0 / gain:.3f} |"
            )
    print(
        f"work vs best constant clock: min {min(ratios):.4f}, mean "
        f"{sum(ratios) / len(ratios):.4f}; board energy / budget: max {max(over):.4f}; "
        f"oracle vs best constant: min {min(gains):.3f}, mean {sum(gains) / len(gains):.3f}"
    )


def bench_throughput(boards, docs, duration, seed=0):
    """The throughput policy on the perception trace against the cheapest constant clock
    that misses at most the policy's late-frame allowance (``frames.LATE_ALLOWANCE``) of the
    frames, or the share the policy missed where that is more: the two are compared at the
    same late-frame rate. ``seed`` is the trace's (frame jitter) and the sensors'; the
    camera's rate and load are ``simulate.FRAME_RATE_HZ`` / ``FRAME_LOAD`` (30 Hz, 0.45
    unless ``--frame-rate-hz`` / ``--frame-load`` set them: held-out checks)."""
    from governor.runtime import simulate as sim
    from governor.runtime.throughput_parts.frames import LATE_ALLOWANCE

    rate_hz, load = sim.FRAME_RATE_HZ, sim.FRAME_LOAD
    print(
        f"\n## Throughput: {rate_hz:g} Hz perception loop, {duration:.0f} s (a frame needs "
        f"{100 * load:.0f} % of its period at the top clock)" + (f", seed {seed}" if seed else "")
    )
    print(
        f"best constant clock: the cheapest missing at most {100 * LATE_ALLOWANCE:g} % of the "
        "frames (the policy's late-frame allowance), or the share the policy missed where more"
    )
    print(
        "| board | missed % | energy J | best constant clock: MHz, missed %, energy J | "
        "energy vs best constant | vs top clock | margin 0.1: missed %, energy vs best constant |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    ratios, misses = [], []
    trace = "perception-30hz"
    for board in boards:
        doc = docs[board]
        clocks = governor.open_device(f"sim:{board}").supported_clocks_mhz()
        policy = {"policy": "throughput", "rate_hz": rate_hz}
        pin = core_only(board)
        r = simulate(board, policy, trace, duration, profile=doc, seed=seed, **pin)
        missed = r["deadline_misses"] / r["frames"]
        runs = {}
        best = best_rate_clock(
            board,
            doc,
            clocks,
            duration,
            seed=seed,
            allowance=max(LATE_ALLOWANCE, missed),
            runs=runs,
        )
        top = runs.get(len(clocks) - 1) or constant(
            board, doc, clocks[-1], trace, duration, seed=seed
        )
        # the default learns the headroom from the frames' spread; an explicit margin keeps
        # that share of the period free at the slowest recent frame (no frame late): its cost
        strict = simulate(
            board, dict(policy, margin=0.1), trace, duration, profile=doc, seed=seed, **pin
        )
        ratios.append(r["energy_j"] / best["energy_j"])
        misses.append(100 * missed)
        print(
            f"| {board} | {misses[-1]:.2f} | {r['energy_j']:.0f} | "
            f"{best['mean_clock_mhz']:.0f}, {100 * best['deadline_misses'] / best['frames']:.2f}, "
            f"{best['energy_j']:.0f} | {ratios[-1]:.4f} | "
            f"{r['energy_j'] / top['energy_j']:.3f} | "
            f"{100 * strict['deadline_misses'] / strict['frames']:.2f}, "
            f"{strict['energy_j'] / best['energy_j']:.4f} |"
        )
    print(
        f"energy vs best constant clock: max {max(ratios):.4f}, mean "
        f"{sum(ratios) / len(ratios):.4f}, above 1.002 on {sum(x > 1.002 for x in ratios)} of "
        f"{len(ratios)}; missed: max {max(misses):.2f} %"
    )


def idle_energy_j(board, duration):
    """The board's input energy idling ``duration`` s at its lowest clock (thermal steady
    state): the least any frame schedule can spend."""
    from governor.devices.sim.catalog import get_board

    spec = get_board(board)
    gpu = spec.steady_gpu_power_w(spec.clocks_mhz[0], None, spec.default_mem_clock_mhz)
    return spec.board_power_w(gpu) * duration


def bench_floor(boards, docs, duration, seed=0):
    """Throughput with a battery floor over the 30 Hz loop: a budget 20 % above what the
    throughput policy alone uses on the board's input (the rate must hold, the floor must not
    cost energy), and one 20 % below it (the budget must hold: the rate degrades).

    The simulated app asks ``gov.admit()`` before each frame and skips the frames it
    refuses; "app ignores" is the same run with an app that does not ask (the governor
    degrades by clock alone: where even the lowest clock running every frame costs more
    than the budget, column "lowest clock", it cannot hold it). The budget is infeasible
    only where the board idling alone (at its lowest clock) costs more ("idle alone").
    ``seed`` is the trace's and the sensors' (held-out checks); the camera is
    ``simulate.FRAME_RATE_HZ`` / ``FRAME_LOAD`` as in :func:`bench_throughput`. Returns the
    worst short-budget board energy / budget (boards where idling alone fits)."""
    from governor.runtime import simulate as sim

    rate_hz, load = sim.FRAME_RATE_HZ, sim.FRAME_LOAD
    print(
        f"\n## Throughput with a battery floor: {rate_hz:g} Hz perception loop, "
        f"{duration:.0f} s (a frame needs {100 * load:.0f} % of its period at the top clock), "
        "budget = throughput-alone board energy × 1.2 (ample) or × 0.8 (short)"
        + (f", seed {seed}" if seed else "")
    )
    print(
        "| board | throughput alone: board J, missed % | ample: missed %, skipped %, energy vs "
        "alone | short, app asks gov.admit(): board energy vs budget, missed %, skipped %, "
        "degraded s | short, app ignores: board energy vs budget, missed % | lowest clock vs "
        "budget | idle alone vs budget |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    worst_over, worst_ample, worst_ignored = 0.0, 0.0, 0.0
    pct = lambda r, key: 100.0 * r[key] / r["frames"]  # noqa: E731
    for board in boards:
        doc = docs[board]
        spec = {"policy": "throughput", "rate_hz": rate_hz}
        pin = core_only(board)
        alone = simulate(
            board, spec, "perception-30hz", duration, profile=doc, scope="board", seed=seed, **pin
        )
        floor = dict(spec, duration_s=duration)
        ample = simulate(
            board,
            dict(floor, energy_j=1.2 * alone["energy_j"]),
            "perception-30hz",
            duration,
            profile=doc,
            seed=seed,
            **pin,
        )
        budget = 0.8 * alone["energy_j"]
        runs = [
            simulate(
                board,
                dict(floor, energy_j=budget),
                "perception-30hz",
                duration,
                profile=doc,
                admit=admit,
                seed=seed,
                **pin,
            )
            for admit in (True, False)
        ]
        short, ignored = runs
        low = constant(
            board,
            doc,
            governor.open_device(f"sim:{board}").supported_clocks_mhz()[0],
            "perception-30hz",
            duration,
            "board",
            seed,
        )
        idle = idle_energy_j(board, duration) / budget
        if idle <= 1.0:
            worst_over = max(worst_over, short["board_energy_j"] / budget)
        worst_ignored = max(worst_ignored, ignored["board_energy_j"] / budget)
        worst_ample = max(worst_ample, pct(ample, "deadline_misses") + pct(ample, "frames_skipped"))
        print(
            f"| {board} | {alone['energy_j']:.0f}, {pct(alone, 'deadline_misses'):.2f} | "
            f"{pct(ample, 'deadline_misses'):.2f}, {pct(ample, 'frames_skipped'):.2f}, "
            f"{ample['energy_j'] / alone['energy_j']:.3f} | "
            f"{short['board_energy_j'] / budget:.3f}, {pct(short, 'deadline_misses'):.2f}, "
            f"{pct(short, 'frames_skipped'):.1f}, {short['rate_degraded_s'] or 0.0:.0f} | "
            f"{ignored['board_energy_j'] / budget:.3f}, {pct(ignored, 'deadline_misses'):.1f} | "
            f"{low['energy_j'] / budget:.3f} | {idle:.3f}{'' if idle <= 1.0 else ' (infeasible)'} |"
        )
    print(
        f"ample budget: worst missed + skipped {worst_ample:.2f} %; short budget, app asks: "
        f"board energy / budget max {worst_over:.3f} (boards where idling alone fits); app "
        f"ignores: max {worst_ignored:.3f}"
    )
    return worst_over


def bench_online_ppw(boards, docs, duration):
    """``--policy ppw`` with no profile: the clock found online against the calibrated one,
    by the simulator's true steady-state energy per unit of work of the board's load."""
    from governor.devices.sim.catalog import get_board

    print(f"\n## Online PPW (no profile), steady compute load, {duration:.0f} s")
    print(
        "| board | found MHz | after s (probes) | calibrated PPW MHz | energy/unit vs calibrated | ok (≤ 1.02, ≤ 60 s) |"
    )
    print("|---|---:|---:|---:|---:|:-:|")
    worst = 0.0
    for board in boards:
        spec = get_board(board)
        load = spec.workloads["compute"]
        r = simulate(board, {"policy": "ppw"}, "steady", duration, profile=False)
        found = r["online_ppw"]
        cal = docs[board]["ppw_optimal_clock_mhz"]
        if found is None:
            print(f"| {board} | - | - | {cal:g} | - | NO |")
            worst = float("inf")
            continue
        ratio = spec.steady_energy_per_unit_j(
            found["clock_mhz"], load
        ) / spec.steady_energy_per_unit_j(cal, load)
        worst = max(worst, ratio)
        ok = ratio <= 1.02 and found["found_after_s"] <= 60
        print(
            f"| {board} | {found['clock_mhz']:g} | {found['found_after_s']:.1f} ({found['probes']}) | "
            f"{cal:g} | {ratio:.4f} | {'yes' if ok else 'NO'} |"
        )
    print(f"worst: {worst:.4f} of the calibrated optimum's energy")


OVERHEAD = r"""
import json, os, resource, sys, time
def rss_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
import governor
from governor.runtime import Governor
from governor.timebase import WallClock
dev = governor.open_device("sim:agx-orin", clock=WallClock())
dev.run_workload("compute")
dev.sample()
before = rss_kb()
gov = Governor(dev, {"policy": "power-cap", "cap_w": 25}, interval_s=0.1)
gov.start()
cpu0, wall0 = time.process_time(), time.monotonic()
time.sleep(float(sys.argv[1]))
cpu = time.process_time() - cpu0
wall = time.monotonic() - wall0
after = rss_kb()
steps = gov.status()["steps"]
gov.stop()
print(json.dumps({"rss_added_mb": (after - before) / 1024.0, "cpu_pct": 100.0 * cpu / wall, "steps": steps,
                  "scipy": "scipy" in sys.modules, "numpy": "numpy" in sys.modules}))
"""


def _ticking_steps(gov, dev, steps=2000, busy_s=None, tick=True):
    """Median and 95th percentile (µs) of ``gov.update()`` over ``steps`` control periods of
    simulated time, the app ticking before each: one frame of ``busy_s`` seconds, or (no
    ``busy_s``) the whole units of work the simulated load had finished by the step before,
    as a job reporting its work does (``tick`` False: a job that reports nothing). (The
    units are read just after a step, at its simulated time: read later, the simulator
    would integrate the period there, outside the step timed.)"""
    times = []
    ticked = done = 0
    for _ in range(steps):
        dev.clock.sleep(gov.interval_s)
        if tick and busy_s is not None:
            gov.tick(1.0, busy_s=busy_s)
        elif tick and done > ticked:
            gov.tick(float(done - ticked))
            ticked = done
        t0 = time.perf_counter()
        gov.update()
        times.append(time.perf_counter() - t0)
        if tick and busy_s is None:
            done = math.floor(dev.work_done())
    times.sort()
    return statistics.median(times) * 1e6, times[int(0.95 * len(times))] * 1e6


OVERHEAD_KINDS = ("power-cap", "throughput", "battery", "battery-no-ticks")


def overhead_spec(kind, board):
    """The overhead bench's policy for one step kind (``OVERHEAD_KINDS``) on ``board``:
    (policy spec, a frame's busy seconds or None, whether the app ticks)."""
    if kind == "power-cap":
        cap_w = 0.7 * 40 if board == "agx-orin" else 100
        return {"policy": "power-cap", "cap_w": cap_w}, None, False
    if kind == "throughput":
        return {"policy": "throughput", "rate_hz": 10.0}, 0.05, True
    top = governor.open_device(f"sim:{board}")
    top.run_workload("compute")
    top.clock.sleep(1.0)
    top_w = top.sample().board_power_w or top.sample().power_w
    # a budget the top clock would spend in 70 % of the mission: the plan binds
    battery = {"policy": "battery", "energy_j": 0.7 * top_w * 3600.0, "duration_s": 3600.0}
    return battery, None, kind == "battery"


def bench_overhead(seconds, docs=None):
    import json

    from governor.runtime import Governor

    print("\n## Overhead")
    print("| measure | value | target |")
    print("|---|---:|---|")
    for board in ("agx-orin", "a100-pcie", "rtx-a4000"):
        dev = governor.open_device(f"sim:{board}")
        dev.run_workload("compute")
        gov = Governor(dev, overhead_spec("power-cap", board)[0], background=False)
        with gov:
            med, _ = _ticking_steps(gov, dev, tick=False)
            sample_t = []
            for _ in range(500):
                dev.clock.sleep(gov.interval_s)
                t0 = time.perf_counter()
                dev.sample()
                sample_t.append(time.perf_counter() - t0)
        dev_med = statistics.median(sample_t) * 1e6
        print(
            f"| control step, sim:{board} (median, incl. device read {dev_med:.0f} µs) | {med:.0f} µs | ≤ 100 µs |"
        )
    # the policies that learn from the app's ticks, with a calibrated profile: the steps
    # that cost the most (a battery step with ticks fits the work rate per clock)
    for board in ("agx-orin", "a100-sxm"):
        doc = (docs or {}).get(board)
        if doc is None:
            continue
        labels = {
            "throughput": "throughput 10 Hz",
            "battery": "battery, ticks",
            "battery-no-ticks": "battery, no ticks",
        }
        for kind, label in labels.items():
            spec, busy_s, tick = overhead_spec(kind, board)
            dev = governor.open_device(f"sim:{board}")
            dev.run_workload("compute")
            with Governor(dev, spec, profile=doc, background=False) as gov:
                med, p95 = _ticking_steps(gov, dev, busy_s=busy_s, tick=tick)
            print(
                f"| control step, {label}, sim:{board} (median; p95 {p95:.0f} µs) | {med:.0f} µs | ≤ 100 µs |"
            )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    out = subprocess.run(
        [sys.executable, "-c", OVERHEAD, str(seconds)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    doc = json.loads(out.stdout.splitlines()[-1])
    print(
        f"| CPU share at 10 Hz (background thread, real-time sim, {seconds:.0f} s, {doc['steps']} steps) | {doc['cpu_pct']:.2f} % | reported |"
    )
    print(f"| RSS added by a running governor | {doc['rss_added_mb']:.2f} MB | ≤ 30 MB |")
    print(
        f"| scipy / numpy imported by the runtime path | {doc['scipy']} / {doc['numpy']} | False |"
    )


def _seed_list(text: str):
    """``--floor-seeds``: comma-separated non-negative integers (empty: none)."""
    try:
        seeds = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seeds like 0,1,2, got {text!r}") from None
    if any(s < 0 for s in seeds):
        raise argparse.ArgumentTypeError(f"seeds must be >= 0, got {text!r}")
    return seeds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", default="", help="comma-separated boards (default: all)")
    parser.add_argument("--quick", action="store_true", help="shorter runs")
    parser.add_argument(
        "--battery-ticks",
        choices=("no", "yes", "both"),
        default="both",
        help="battery: whether the simulated job reports its work with gov.tick",
    )
    parser.add_argument("--seed", type=int, default=0, help="trace seed (bursty, throughput)")
    parser.add_argument(
        "--frame-rate-hz",
        type=float,
        default=None,
        help="throughput and floor: the camera's rate (default 30; held-out checks)",
    )
    parser.add_argument(
        "--frame-load",
        type=float,
        default=None,
        help="throughput and floor: a frame's share of its period at the top clock (default 0.45)",
    )
    parser.add_argument(
        "--floor-seeds",
        type=_seed_list,
        default=[],
        help="floor: comma-separated seeds to run the table on, one table each, and the "
        "worst short-budget overrun per seed (default: --seed; held-out checks)",
    )
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated sections: cap, battery, siblings, throughput, floor, online, "
        "overhead (default: all)",
    )
    parser.add_argument(
        "--baseline-cache",
        default=None,
        metavar="FILE",
        help="battery: keep the calibrated profiles and the baselines (budget, best constant "
        "clock, oracle) in FILE and reuse them; rebuilt when the simulator, calibration or "
        "profile code changed (default: computed every run)",
    )
    args = parser.parse_args()
    only = set(filter(None, args.only.split(","))) or {
        "cap",
        "battery",
        "siblings",
        "throughput",
        "floor",
        "online",
        "overhead",
    }
    boards = [b for b in args.boards.split(",") if b] or list(board_names())
    t0 = time.perf_counter()
    cache = BaselineCache(args.baseline_cache)
    docs = {b: cache.profile(b) for b in boards}
    scale = 0.25 if args.quick else 1.0
    if "cap" in only:
        bench_cap(boards, docs, 120 * scale)
    if "battery" in only:
        for ticks in {"no": (False,), "yes": (True,)}.get(args.battery_ticks, (False, True)):
            bench_battery(boards, docs, 600 * scale, ticks=ticks, seed=args.seed, cache=cache)
    if "siblings" in only:
        for ticks in {"no": (False,), "yes": (True,)}.get(args.battery_ticks, (False, True)):
            bench_battery(
                boards, docs, 600 * scale, ticks=ticks, seed=args.seed, cache=cache, siblings=True
            )
    from governor.runtime import simulate as sim

    kept = sim.FRAME_RATE_HZ, sim.FRAME_LOAD
    if args.frame_rate_hz is not None:
        sim.FRAME_RATE_HZ = args.frame_rate_hz
    if args.frame_load is not None:
        sim.FRAME_LOAD = args.frame_load
    if "throughput" in only:
        bench_throughput(boards, docs, 60 * scale, seed=args.seed)
    if "floor" in only:
        seeds = args.floor_seeds or [args.seed]
        worst = {s: bench_floor(boards, docs, 60 * scale, seed=s) for s in seeds}
        if len(seeds) > 1:
            print(
                "\nfloor, short budget, app asks: board energy / budget max by seed: "
                + ", ".join(f"{s}: {w:.4f}" for s, w in worst.items())
                + f"; over all {max(worst.values()):.4f}"
            )
    sim.FRAME_RATE_HZ, sim.FRAME_LOAD = kept  # the other sections' camera
    if "online" in only:
        bench_online_ppw(boards, docs, 60.0)
    if "overhead" in only:
        bench_overhead(5.0 * scale, docs)
    print(f"\n(bench ran in {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
