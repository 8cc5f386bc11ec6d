"""The steps that change the GPU: control, calibration, tune-blocks.

Each change happens inside ``ctx.owned(step)``: the device's lock is taken, the original is
journaled before the write, and the layer is restored when the block ends. ``apply`` and
``reset`` run as the real commands in subprocesses, with the device let go first.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from typing import Any, Dict, List, Optional, Tuple

from governor.errors import DevicePermissionError, UnsupportedError
from gpucheck.core import Context, Control, Skip, StepOut, one_line, rel, rounded, spread

__all__ = ["calibration", "control", "probe_control", "tune_blocks"]

# reasons a clock may sit below the one locked (the lock is then honoured as a ceiling)
_LIMITING = {"sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake"}


def probe_control(device: Any) -> Control:
    """Whether this process may change ``device``, found by trying: the GPU clock locked to
    its whole range (no change in effect) and put back. Containers often refuse it though
    the process runs as root."""
    reason = device.control_reason()
    if reason is not None:
        return Control(False, reason)
    table = device.supported_clocks_mhz()
    if not table:
        return Control(False, "no lockable clock")
    try:
        device.acquire("gpu_check control probe")
        try:
            device.lock_gpu_clocks(table[0], table[-1])
        finally:
            device.release()
    except Exception as err:  # DevicePermissionError in a container, a busy device...
        return Control(False, one_line(err))
    return Control(True)


def _clock_under_load(ctx: Context, seconds: float) -> Tuple[Optional[float], List[str]]:
    """Mean graphics clock (MHz) over the second half of ``seconds``, and the throttle
    reasons seen then."""
    dev = ctx.device
    ctx.sleep(seconds / 2)
    clocks, reasons = [], set()
    end = ctx.now_s() + seconds / 2
    while ctx.now_s() < end:
        s = dev.sample()
        if s.gpu_clock_mhz is not None:
            clocks.append(s.gpu_clock_mhz)
        reasons |= set(s.throttle_reasons)
        ctx.sleep(0.05)
    return (statistics.mean(clocks) if clocks else None), sorted(reasons)


def _held(applied: float, measured: Optional[float], reasons: List[str]) -> bool:
    """A locked clock is held within 2 % (or 15 MHz); under a power or thermal limit the
    lock is a ceiling, so a clock below it counts as held."""
    if measured is None:
        return False
    tol = max(0.02 * applied, 15.0)
    if set(reasons) & _LIMITING:
        return measured <= applied + tol
    return abs(measured - applied) <= tol


def control(ctx: Context, out: StepOut) -> None:
    """Lock three clocks and read them back under load, set and restore the power limit,
    then ``governor apply`` and ``governor reset`` as commands."""
    ctx.require_control()
    dev = ctx.device
    table = dev.supported_clocks_mhz()
    loaded = ctx.has_load("builtin")
    if not loaded:
        out.note(f"clocks read back idle: {ctx.load_error('builtin')}")
    picks = [table[int(f * (len(table) - 1))] for f in (0.2, 0.5, 0.8)]
    from governor.devices.ownership import journal_path

    key = dev.identity.key or dev.uri
    path = journal_path(key) if dev.persistent_state else None
    rows = []
    with ctx.owned("control"):
        holder = ctx.running("builtin") if loaded else _Idle()
        with holder:
            for clock in picks:
                applied, _ = dev.lock_gpu_clocks(clock)
                measured, reasons = _clock_under_load(ctx, ctx.settings.lock_hold_s)
                rows.append(
                    {"locked_mhz": applied, "measured_mhz": rounded(measured), "reasons": reasons}
                )
                out.check(
                    f"clock {applied:g} MHz held",
                    _held(applied, measured, reasons),
                    rounded(measured),
                    "within 2 % or 15 MHz (a ceiling when capped)",
                )
        if path is not None:
            on_disk = json.loads(path.read_text()) if path.exists() else None
            out.check(
                "journal holds the original clock",
                on_disk is not None and "gpu_clocks" in json.dumps(on_disk),
                str(path),
                "journaled before the write",
            )
        limit = _set_power_limit(dev, out)
    out.figure("locks", rows)
    if limit is not None:
        before = limit["before"]
        back = dev.state().power_limit_w
        out.check(
            "power limit restored",
            back is not None and before is not None and abs(back - before) <= 1.0,
            back,
            f"{before} W within 1 W",
        )
    if path is not None:
        left = json.loads(path.read_text()).get("layers") if path.exists() else []
        out.check("journal layer gone", not left, len(left or []), "no layer left")
    _apply_then_reset(ctx, out, picks[1], loaded)
    out.summary = ", ".join(f"{r['locked_mhz']:g}->{r['measured_mhz']}" for r in rows) + " MHz"


def _set_power_limit(dev: Any, out: StepOut) -> Optional[Dict[str, Any]]:
    """Set the power limit to about 80 % of the present one and read it back; returns
    ``{"before", "set", "read"}`` (W), or None where the limit cannot be set."""
    limits = dev.power_limit_range()
    if not dev.capabilities.power_limit or limits is None:
        out.note("no settable power limit")
        return None
    before = dev.state().power_limit_w
    target = max(limits.min_w, round(0.8 * (before or limits.default_w)))
    if before is not None and abs(target - before) < 1:
        target = limits.max_w if before < limits.max_w else limits.min_w
    try:
        dev.set_power_limit(target)
    except (DevicePermissionError, UnsupportedError) as err:
        out.note(f"power limit not settable: {one_line(err)}")
        return None
    now = dev.state().power_limit_w
    out.check(
        "power limit set",
        now is not None and abs(now - target) <= 1.0,
        {"set_w": target, "read_w": now},
        "within 1 W",
    )
    return out.figure("power_limit_w", {"before": before, "set": target, "read": now})


class _Idle:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _run(ctx: Context, *args: str) -> Tuple[int, Dict[str, Any], str]:
    proc = subprocess.run(
        ctx.governor_argv(*args),
        capture_output=True,
        text=True,
        env=ctx.subprocess_env(),
        timeout=120,
    )
    doc: Dict[str, Any] = {}
    for line in proc.stdout.splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
    err = (proc.stderr.strip().splitlines()[-1:] or [""])[0]
    return proc.returncode, doc, err


def _apply_then_reset(ctx: Context, out: StepOut, clock: float, loaded: bool) -> None:
    dev = ctx.device
    if not dev.persistent_state:
        out.note("apply/reset not run: the device lives in this process")
        return
    if ctx.journal_before:
        out.note(
            "apply/reset not run: a journal from before this check exists (reset would undo it)"
        )
        return
    uri = dev.identity.key or dev.uri
    rc, doc, err = _run(ctx, "apply", "--device", uri, "--clock", f"{clock:g}", "--json")
    if not out.check("governor apply", rc == 0, err if rc else doc, "exit 0"):
        return
    holder = ctx.running("builtin") if loaded else _Idle()
    with holder:
        measured, reasons = _clock_under_load(ctx, ctx.settings.lock_hold_s)
    out.check(
        "applied clock held",
        _held(clock, measured, reasons),
        rounded(measured),
        f"{clock:g} MHz within 2 % or 15 MHz",
    )
    rc, doc, err = _run(ctx, "reset", "--device", uri, "--json")
    out.check("governor reset", rc == 0, err if rc else doc, "exit 0")
    from governor.devices.ownership import journal_path

    path = journal_path(uri)
    left = json.loads(path.read_text()).get("layers") if path.exists() else []
    out.check("reset leaves no journal layer", not left, len(left or []), "none")


# -- calibration ---------------------------------------------------------------------------
def _calibrate_one(ctx: Context, kind: str) -> Dict[str, Any]:
    from governor.calibrate.procedure import DeviceProber, calibrate

    s = ctx.settings
    dev = ctx.device
    load = ctx.load(kind)
    with ctx.owned(f"calibration {kind}"):
        prober = DeviceProber(
            dev,
            load,
            window_s=s.window_s,
            min_settle_s=s.settle_min_s,
            max_settle_s=s.settle_max_s,
            idle_s=s.calib_idle_s,
        )
        try:
            t0 = time.monotonic()
            result = calibrate(prober, max_probes=s.max_probes)
            calib_wall = time.monotonic() - t0
            calib_device = prober.device_time_s
            chosen = result.ppw_optimal_clock_mhz
            clocks = sorted(set(spread(dev.supported_clocks_mhz(), s.brute_clocks)) | {chosen})
            sweep = {}
            t1 = time.monotonic()
            for clock in sorted(clocks, key=lambda c: (c != chosen, c)):  # the choice first
                per_probe = calib_device / max(len(result.probes), 1)
                if ctx.out_of_time(per_probe + 5):
                    break
                sweep[clock] = prober.probe(clock)
            sweep_wall = time.monotonic() - t1
        finally:
            prober.finish()
    energies = {c: p.energy_per_unit_j for c, p in sweep.items()}
    best = min(energies, key=lambda c: energies[c]) if energies else None
    ratio = rel(energies.get(chosen), energies[best]) if best is not None else None
    return {
        "load": load.name,
        "chosen_clock_mhz": chosen,
        "method": result.method,
        "probes": len(result.probes),
        "device_time_s": rounded(calib_device),
        "wall_s": rounded(calib_wall),
        "warnings": result.warnings,
        "brute_force": [
            {
                "clock_mhz": c,
                "energy_per_unit_j": rounded(energies[c], 6),
                "power_w": rounded(p.power_w),
                "status": p.status,
            }
            for c, p in sorted(sweep.items())
        ],
        "brute_force_clocks": len(sweep),
        "brute_force_wall_s": rounded(sweep_wall),
        "best_clock_mhz": best,
        "chosen_over_best": rounded(ratio),
    }


def calibration(ctx: Context, out: StepOut) -> None:
    """``governor calibrate`` with the compute and the memory load, each judged by the same
    load swept over 8-12 clocks: the calibrated clock's energy per unit over the best."""
    ctx.require_control()
    parts = []
    kinds = []
    for kind, label in (("builtin", "compute"), ("memory", "memory")):
        try:
            ctx.load(kind)
            kinds.append((kind, label))
        except Skip as err:
            out.note(str(err))
    step_deadline = ctx.step_deadline
    for i, (kind, label) in enumerate(kinds):
        if ctx.out_of_time(20 * ctx.settings.scale):
            out.note(f"{label}: budget spent")
            continue
        # each load gets an equal share of what is left, so the sweep of the first cannot
        # starve the second
        ctx.step_deadline = time.monotonic() + ctx.left_s() / (len(kinds) - i)
        try:
            doc = out.figure(label, _calibrate_one(ctx, kind))
        except (KeyboardInterrupt, Skip):
            raise
        except Exception as err:  # the other load still gets its turn
            out.check(f"{label}: calibration runs", False, one_line(err), "no error")
            continue
        finally:
            ctx.step_deadline = step_deadline
        if kind == "builtin":
            ctx.shared["ppw_clock_mhz"] = doc["chosen_clock_mhz"]
        ratio = doc["chosen_over_best"]
        if doc["brute_force_clocks"] < 2:
            out.note(f"{label}: the sweep had no time to run (budget)")
        out.check(
            f"{label}: calibrated over best measured",
            ratio is not None and ratio <= 1.10,
            ratio,
            "<= 1.10",
        )
        parts.append(
            f"{label} {doc['chosen_clock_mhz']:g} MHz, x{ratio} of best "
            f"({doc['probes']} probes, {doc['device_time_s']} s)"
        )
    if not parts and not out.checks:
        raise Skip("; ".join(out.notes) or "no load to calibrate with")
    out.summary = "; ".join(parts)


# -- tune-blocks ---------------------------------------------------------------------------
def tune_blocks(ctx: Context, out: StepOut) -> None:
    """The block-size procedure (Alg. 2: blocks and one clock of least energy) on a real
    kernel, started at the calibrated clock, against the plain default (256 threads at the
    top clock)."""
    ctx.require_control()
    from governor.tuning.blocks import KernelResources, rank_candidates, tune_energy_multi
    from gpucheck.kernel_step import saxpy_bench

    dev = ctx.device
    clocks = spread(dev.supported_clocks_mhz(), ctx.settings.tune_clocks)
    if hasattr(dev, "run_workload"):  # a simulated board: its vector-add model
        from governor.tuning.blocks.bench import SimBench
        from governor.tuning.blocks.simkernels import kernel_by_name

        model = kernel_by_name("vector-add")
        bench: Any = SimBench(dev, [model], warmup_s=2.0)
        cc = str(dev.board.facts["cc"])
        resources = KernelResources(
            model.registers_per_thread, model.static_shared_bytes, model.shared_bytes_per_thread
        )
        kernel = "vector-add (simulated)"
    else:
        bench, cc, resources, kernel = saxpy_bench(ctx, clocks)
    candidates = rank_candidates(cc, resources, None, 0.8)
    start = ctx.shared.get("ppw_clock_mhz")
    with ctx.owned("tune-blocks"):
        t0 = time.monotonic()
        result = tune_energy_multi(bench, [candidates], start_clock_mhz=start)
        wall = time.monotonic() - t0
        default = bench.measure(((256, 1, 1),), max(clocks))
    ratio = rel(result.energy_j, default.energy_j)
    out.figure("kernel", kernel)
    out.figure("compute_capability", cc)
    out.figure("chosen", result.to_dict())
    out.figure(
        "default",
        {
            "block": 256,
            "clock_mhz": max(clocks),
            "time_s": default.time_s,
            "energy_j": default.energy_j,
        },
    )
    out.figure("start_clock_mhz", start)
    out.figure("wall_s", rounded(wall))
    out.figure("energy_chosen_over_default", rounded(ratio))
    out.figure("time_chosen_over_default", rounded(rel(result.time_s, default.time_s)))
    out.check(
        "chosen energy vs default",
        ratio is not None and ratio <= 1.05,
        rounded(ratio),
        "<= 1.05 x 256 threads at the top clock",
    )
    out.summary = (
        f"{kernel}: blocks {result.blocks[0][0]} at {result.clock_mhz:g} MHz, "
        f"energy x{rounded(ratio)} of default, {result.measurements} measurements"
    )
