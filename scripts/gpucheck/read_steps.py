"""The steps that only read the GPU: discovery, telemetry, loads, energy windows, exporter."""

from __future__ import annotations

import json
import select
import shutil
import statistics
import subprocess
import time
import urllib.request
from typing import Any, Dict, List, Optional, Sequence, Tuple

from gpucheck.core import Context, Skip, StepOut, one_line, rel, rounded

__all__ = [
    "discovery",
    "energy_windows",
    "exporter",
    "loads",
    "nvidia_smi_rows",
    "sample_for",
    "telemetry",
]

# what nvidia-smi is asked, in this order (nvidia-smi --help-query-gpu names them)
SMI_FIELDS = (
    "uuid",
    "name",
    "driver_version",
    "pci.bus_id",
    "power.limit",
    "power.min_limit",
    "power.max_limit",
    "power.default_limit",
    "clocks.max.graphics",
    "power.draw",
    "temperature.gpu",
)


# -- sampling ------------------------------------------------------------------------------
def sample_for(ctx: Context, seconds: float) -> List[Tuple[Any, float]]:
    """(sample, wall seconds the read took) for ``seconds`` of device time, read as fast as
    every ``poll_s``."""
    dev = ctx.device
    end = ctx.now_s() + seconds
    out: List[Tuple[Any, float]] = []
    while ctx.now_s() < end:
        t0 = time.perf_counter()
        sample = dev.sample()
        out.append((sample, time.perf_counter() - t0))
        ctx.sleep(ctx.settings.poll_s)
    return out


def _update_interval_s(
    times: Sequence[float], values: Sequence[Optional[float]]
) -> Optional[float]:
    """The median time between changes of ``values`` (how often the sensor updates), None
    when it changed fewer than twice."""
    changes = [t for t, a, b in zip(times[1:], values, values[1:]) if a is not None and b != a]
    if len(changes) < 2:
        return None
    return statistics.median(b - a for a, b in zip(changes, changes[1:]))


def _integrated_j(samples: Sequence[Any]) -> Optional[float]:
    powered = [s for s in samples if s.power_w is not None]
    if len(powered) < 2:
        return None
    return sum(
        0.5 * (a.power_w + b.power_w) * (b.t_s - a.t_s) for a, b in zip(powered, powered[1:])
    )


def summarise(samples: Sequence[Tuple[Any, float]]) -> Dict[str, Any]:
    """Power, clocks, temperature, sample rate, read cost and sensor update intervals."""
    rows = [s for s, _ in samples]
    if not rows:
        return {"samples": 0}
    times = [s.t_s for s in rows]
    span = times[-1] - times[0]
    powers = [s.power_w for s in rows if s.power_w is not None]
    clocks = [s.gpu_clock_mhz for s in rows if s.gpu_clock_mhz is not None]
    temps = [s.temperature_c for s in rows if s.temperature_c is not None]
    energy = [s.energy_j for s in rows]
    doc: Dict[str, Any] = {
        "samples": len(rows),
        "span_s": rounded(span),
        "sample_rate_hz": rounded((len(rows) - 1) / span) if span > 0 else None,
        "read_cost_ms": rounded(1e3 * statistics.mean(c for _, c in samples)),
        "power_w_mean": rounded(statistics.mean(powers)) if powers else None,
        "power_w_min": rounded(min(powers)) if powers else None,
        "power_w_max": rounded(max(powers)) if powers else None,
        "power_scope": rows[-1].power_scope,
        "power_update_s": rounded(_update_interval_s(times, [s.power_w for s in rows])),
        "gpu_clock_mhz_mean": rounded(statistics.mean(clocks)) if clocks else None,
        "mem_clock_mhz": rows[-1].mem_clock_mhz,
        "temperature_c_first": temps[0] if temps else None,
        "temperature_c_last": temps[-1] if temps else None,
        "utilisation_pct_last": rows[-1].utilisation_pct,
        "throttle_reasons": sorted(set().union(*(s.throttle_reasons for s in rows))),
    }
    if energy[0] is not None and energy[-1] is not None:
        counter = energy[-1] - energy[0]
        integrated = _integrated_j(rows)
        doc["energy_counter_j"] = rounded(counter)
        doc["energy_integrated_j"] = rounded(integrated)
        doc["counter_over_integrated"] = rounded(rel(counter, integrated))
        doc["energy_update_s"] = rounded(_update_interval_s(times, energy))
        doc["energy_counter_monotonic"] = all(
            b >= a for a, b in zip(energy, energy[1:]) if a is not None and b is not None
        )
    return doc


# -- discovery -----------------------------------------------------------------------------
def _smi_value(text: str) -> Optional[str]:
    text = text.strip()
    if not text or text.startswith("[") or text.upper() in ("N/A", "NOT SUPPORTED"):
        return None
    return text


def nvidia_smi_rows(env: Optional[Dict[str, str]] = None) -> Optional[List[Dict[str, Any]]]:
    """``nvidia-smi --query-gpu=...`` as one dict per GPU (None: no nvidia-smi here).

    Raises:
        RuntimeError: nvidia-smi is there but failed or printed something unreadable.
    """
    path = shutil.which("nvidia-smi", path=(env or {}).get("PATH"))
    if path is None:
        return None
    proc = subprocess.run(
        [path, f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [""]
        raise RuntimeError(f"nvidia-smi exited with {proc.returncode}: {tail[0]}")
    rows = []
    for line in proc.stdout.strip().splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(SMI_FIELDS):
            raise RuntimeError(f"nvidia-smi printed {len(cells)} fields, not {len(SMI_FIELDS)}")
        rows.append({k: _smi_value(v) for k, v in zip(SMI_FIELDS, cells)})
    return rows


def _float(text: Optional[str]) -> Optional[float]:
    try:
        return None if text is None else float(text)
    except ValueError:
        return None


def discovery(ctx: Context, out: StepOut) -> None:
    """What the GPU says it is and can do, against nvidia-smi where it is installed."""
    dev = ctx.device
    ident = dev.identity
    table = dev.supported_clocks_mhz()
    limits = dev.power_limit_range()
    state = dev.state()
    sample = dev.sample()
    out.figure("name", ident.name)
    out.figure("uuid", ident.uuid)
    out.figure("pci_bus_id", getattr(dev, "pci_bus_id", None))
    out.figure("driver_version", ident.driver_version)
    out.figure("model", ident.model)
    out.figure("capabilities", dev.capabilities.to_dict())
    out.figure("power_source", getattr(dev, "power_source", None))
    out.figure(
        "clock_table_mhz",
        {
            "count": len(table),
            "min": table[0] if table else None,
            "max": table[-1] if table else None,
        },
    )
    out.figure("mem_clocks_mhz", list(dev.supported_mem_clocks_mhz()))
    out.figure(
        "power_limits_w",
        None
        if limits is None
        else {
            "min": limits.min_w,
            "max": limits.max_w,
            "default": limits.default_w,
            "current": state.power_limit_w,
        },
    )
    out.figure("energy_counter_j", sample.energy_j)
    out.figure("control", {"permitted": ctx.control.permitted, "reason": ctx.control.reason})
    out.figure("control_notes", dev.control_notes())
    out.figure("parts", dev.parts())
    caps = dev.capabilities
    out.check(
        "reads power", caps.power and sample.power_w is not None, sample.power_w, "a power reading"
    )
    out.check("clock table", len(table) >= 3, len(table), ">= 3 lockable clocks")
    out.check(
        "energy counter",
        caps.energy_counter and sample.energy_j is not None,
        sample.energy_j,
        "present (Volta and newer)",
    )
    out.summary = (
        f"{ident.name}, {len(table)} clocks {table[0]:g}-{table[-1]:g} MHz" if table else ident.name
    )
    try:
        rows = nvidia_smi_rows(ctx.env)
    except Exception as err:
        out.check("nvidia-smi runs", False, one_line(err), "exit 0, one CSV row per GPU")
        return
    if rows is None:
        out.note("nvidia-smi not found: compared with nothing")
        return
    mine = [r for r in rows if (r["uuid"] or "").lower() == (ident.uuid or "").lower()]
    if not out.check("nvidia-smi lists this UUID", len(mine) == 1, ident.uuid, "exactly one row"):
        return
    smi = mine[0]
    out.figure("nvidia_smi", smi)
    out.check(
        "name", smi["name"] == ident.name.replace(" (MIG instance)", ""), smi["name"], "equal"
    )
    out.check(
        "driver version",
        smi["driver_version"] == ident.driver_version,
        smi["driver_version"],
        "equal",
    )
    if limits is not None:
        for key, mine_w in (
            ("power.min_limit", limits.min_w),
            ("power.max_limit", limits.max_w),
            ("power.default_limit", limits.default_w),
            ("power.limit", state.power_limit_w),
        ):
            theirs = _float(smi[key])
            if theirs is not None and mine_w is not None:
                out.check(
                    key,
                    abs(theirs - mine_w) <= 1.0,
                    {"governor": mine_w, "smi": theirs},
                    "within 1 W",
                )
    top = _float(smi["clocks.max.graphics"])
    if top is not None and table:
        out.check(
            "top clock vs clocks.max.graphics",
            0.85 * top <= table[-1] <= 1.15 * top,
            {"governor": table[-1], "smi": top},
            "within 15 %",
        )
    draw = _float(smi["power.draw"])
    if draw is not None and sample.power_w is not None:
        out.check(
            "power vs power.draw",
            abs(draw - sample.power_w) <= max(0.15 * draw, 15.0),
            {"governor": sample.power_w, "smi": draw},
            "within 15 % or 15 W",
        )
    temp = _float(smi["temperature.gpu"])
    if temp is not None and sample.temperature_c is not None:
        out.check(
            "temperature",
            abs(temp - sample.temperature_c) <= 3.0,
            {"governor": sample.temperature_c, "smi": temp},
            "within 3 °C",
        )


# -- telemetry -----------------------------------------------------------------------------
def telemetry(ctx: Context, out: StepOut) -> None:
    """Power, clocks, temperature, energy counter, sample rate and lag, idle then loaded."""
    settings = ctx.settings
    ctx.stop_loads()
    idle = sample_for(ctx, settings.idle_s)
    idle_doc = out.figure("idle", summarise(idle))
    rate = idle_doc.get("sample_rate_hz")
    out.check("sample rate (idle)", rate is not None and rate >= 10, rate, ">= 10 samples/s")
    cost = idle_doc.get("read_cost_ms")
    out.check("read cost", cost is not None and cost <= 50, cost, "<= 50 ms per sample")
    if "energy_counter_monotonic" in idle_doc:
        out.check(
            "energy counter monotonic",
            idle_doc["energy_counter_monotonic"],
            True,
            "never decreases",
        )
    if not ctx.has_load("builtin"):
        ratio = idle_doc.get("counter_over_integrated")
        if ratio is not None:
            out.check(
                "counter / integrated power (idle)", 0.85 <= ratio <= 1.15, ratio, "0.85-1.15"
            )
        out.note(f"idle only: {ctx.load_error('builtin')}")
        out.summary = f"idle {idle_doc.get('power_w_mean')} W at {rate} samples/s"
        return
    tail = [row for row in idle[-max(3, len(idle) // 2) :]]
    t_step = ctx.now_s()
    with ctx.running("builtin"):
        loaded = sample_for(ctx, settings.load_s)
    # the figures of the steady part: a sensor that averages over a second (GetPowerUsage on
    # Ampere and newer) reads low while the load ramps up, and the counter does not
    settle_s = min(2.0, settings.load_s / 3)
    steady = [row for row in loaded if row[0].t_s >= t_step + settle_s]
    doc = out.figure("loaded", summarise(steady))
    doc["settle_s"] = rounded(settle_s)
    ratio = doc.get("counter_over_integrated")
    if ratio is not None:
        out.check("counter / integrated power (load)", 0.9 <= ratio <= 1.1, ratio, "0.9-1.1")
    if "energy_counter_monotonic" in doc:
        out.check(
            "energy counter monotonic (load)",
            doc["energy_counter_monotonic"],
            True,
            "never decreases",
        )
    idle_w, load_w = idle_doc.get("power_w_mean"), doc.get("power_w_mean")
    out.check(
        "load raises power",
        idle_w is not None and load_w is not None and load_w >= 1.1 * idle_w,
        {"idle_w": idle_w, "load_w": load_w},
        ">= 1.1 x idle",
    )
    first, last = doc.get("temperature_c_first"), doc.get("temperature_c_last")
    if first is not None and last is not None:
        out.figure("temperature_drift_c", last - first)
    out.figure("lag", _lag(tail + loaded, t_step))
    out.summary = (
        f"idle {idle_w} W, load {load_w} W, counter/integrated {ratio}, "
        f"{doc.get('sample_rate_hz')} samples/s"
    )


def _lag(rows: Sequence[Tuple[Any, float]], t_step_s: float) -> Dict[str, Any]:
    """The power sensor's lag constant (s) fitted to the idle-to-load step."""
    from governor.measure.lag import fit_lag_constant

    pairs = [(s.t_s, s.power_w) for s, _ in rows if s.power_w is not None]
    try:
        fit = fit_lag_constant([t for t, _ in pairs], [p for _, p in pairs], t_step_s)
    except Exception as err:
        return {"c_s": None, "why": one_line(err)}
    return {
        "c_s": rounded(fit.c_s),
        "before_w": rounded(fit.before_w),
        "after_w": rounded(fit.after_w),
    }


# -- loads ---------------------------------------------------------------------------------
def _work_rate(ctx: Context, kind: str) -> Dict[str, Any]:
    with ctx.running(kind) as load:
        ctx.sleep(min(0.5, ctx.settings.load_rate_s / 4))  # past start-up and compilation
        w0, t0 = load.work_done(), ctx.now_s()
        ctx.sleep(ctx.settings.load_rate_s)
        w1, t1 = load.work_done(), ctx.now_s()
        load.check()
    rate = (w1 - w0) / (t1 - t0) if t1 > t0 else None
    doc: Dict[str, Any] = {
        "load": load.name,
        "units_per_s": rounded(rate),
        "unit_ms": rounded(1e3 / rate) if rate else None,
    }
    blocks, iterations = getattr(load, "blocks", None), getattr(load, "iterations", None)
    if rate and blocks and iterations:  # cuda-fma: 4 chains of FMA (2 flops) per thread
        doc["gflop_per_s"] = rounded(rate * blocks * 256 * 4 * iterations * 2 / 1e9)
    elements = getattr(load, "elements", None)
    if rate and elements:  # cuda-copy: each float read once and written once
        doc["gb_per_s"] = rounded(rate * elements * 4 * 2 / 1e9)
    return doc


def loads(ctx: Context, out: StepOut) -> None:
    """Both built-in loads run and report a work rate."""
    ran = []
    for kind, label in (("builtin", "compute"), ("memory", "memory")):
        try:
            ctx.load(kind)
        except Skip as err:
            if ctx.load_broken(kind):
                out.check(f"{label} load runs", False, str(err), "no error")
            else:
                out.note(str(err))
            continue
        try:
            doc = out.figure(label, _work_rate(ctx, kind))
        except Exception as err:  # CalibrationError from a load that failed while running
            out.check(f"{label} load runs", False, one_line(err), "no error")
            continue
        rate = doc["units_per_s"]
        out.check(f"{label} work rate", bool(rate and rate > 0), rate, "> 0 units/s")
        ran.append(f"{label} {rate} units/s")
    if not ran and not out.checks:
        raise Skip("; ".join(out.notes) or "no built-in load here")
    out.summary = ", ".join(ran)


# -- energy windows ------------------------------------------------------------------------
def energy_windows(ctx: Context, out: StepOut) -> None:
    """``measure_energy`` windows against the energy counter read around them and against
    power sampled and integrated inside them."""
    import governor

    dev = ctx.device
    loaded = ctx.has_load("builtin")
    if not loaded:
        out.note(f"idle windows: {ctx.load_error('builtin')}")
    rows = []
    load_ctx = ctx.running("builtin") if loaded else _nothing()
    with load_ctx:
        if loaded:
            ctx.sleep(min(1.0, ctx.settings.load_s / 4))
        for seconds in ctx.settings.energy_windows_s:
            if ctx.out_of_time(seconds + 1):
                out.note("budget spent before the longest window")
                break
            c0 = dev.energy_counter_j()
            samples = []
            with governor.measure_energy(dev, f"gpu-check-{seconds:g}s") as w:
                end = ctx.now_s() + seconds
                while ctx.now_s() < end:
                    samples.append(dev.sample())
                    ctx.sleep(ctx.settings.poll_s)
            c1 = dev.energy_counter_j()
            counter = None if c0 is None or c1 is None else c1 - c0
            integrated = _integrated_j(samples)
            row = {
                "window_s": rounded(w.duration_s),
                "energy_j": rounded(w.energy_j),
                "method": w.method,
                "counter_j": rounded(counter),
                "integrated_j": rounded(integrated),
                "window_over_counter": rounded(rel(w.energy_j, counter)),
                "window_over_integrated": rounded(rel(w.energy_j, integrated)),
            }
            rows.append(row)
            if counter is not None:
                mean_w = counter / max(w.duration_s, 1e-9)
                slack = max(0.05 * counter, 0.1 * mean_w)  # 5 %, or 0.1 s of the mean power
                out.check(
                    f"{seconds:g} s window vs counter",
                    abs(w.energy_j - counter) <= slack,
                    row["window_over_counter"],
                    "within 5 % or 0.1 s of power",
                )
            elif integrated is not None:
                out.check(
                    f"{seconds:g} s window vs integrated",
                    abs(w.energy_j - integrated) <= 0.1 * integrated,
                    row["window_over_integrated"],
                    "within 10 %",
                )
    if not rows:
        raise Skip("no window fitted in the budget")
    out.figure("windows", rows)
    out.summary = "window/counter " + ", ".join(
        f"{r['window_s']}s: {r['window_over_counter']}" for r in rows
    )


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


# -- exporter ------------------------------------------------------------------------------
def exporter(ctx: Context, out: StepOut) -> None:
    """``governor exporter`` started on a free port, scraped once, stopped."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        raise Skip("prometheus-client is not installed (the metrics extra)") from None
    dev = ctx.device
    uri = dev.identity.key or dev.uri
    argv = ctx.governor_argv("exporter", "--device", uri, "--listen", "127.0.0.1:0", "--json")
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ctx.subprocess_env()
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        wait_s = max(5.0, ctx.left_s())
        ready, _, _ = select.select([proc.stdout], [], [], wait_s)
        if not ready:
            raise RuntimeError(f"governor exporter printed nothing in {wait_s:.0f} s")
        line = proc.stdout.readline()
        if not line:
            err = proc.stderr.read()
            tail = err.strip().splitlines()[-1:] or ["no output"]
            raise RuntimeError(f"governor exporter ended: {tail[0]}")
        url = json.loads(line)["url"]
        t0 = time.monotonic()
        with urllib.request.urlopen(url, timeout=20) as response:
            text = response.read().decode()
        out.figure("scrape_ms", rounded(1e3 * (time.monotonic() - t0)))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    sample = dev.sample()
    series = _parse_metrics(text)
    out.figure("series", sorted({name for name, _ in series}))
    out.check(
        "device up",
        series.get(("governor_device_up", "")) == 1.0,
        series.get(("governor_device_up", "")),
        "1",
    )
    scope = f'scope="{sample.power_scope}"'
    power = [
        v for (name, lab), v in series.items() if name == "governor_power_watts" and scope in lab
    ]
    if not dev.persistent_state:
        out.note("power not compared: the exporter's board is a simulation of its own")
    elif sample.power_w is not None:
        scraped = power[0] if power else None
        out.check(
            "power",
            scraped is not None
            and abs(scraped - sample.power_w) <= max(0.15 * sample.power_w, 10.0),
            {"scraped": scraped, "read": sample.power_w},
            "within 15 % or 10 W of a read",
        )
    if dev.capabilities.energy_counter:
        energy = [v for (name, _), v in series.items() if name == "governor_energy_joules_total"]
        out.check("energy counter", bool(energy), energy[0] if energy else None, "present")
    clock = [
        v
        for (name, lab), v in series.items()
        if name == "governor_clock_hertz" and "graphics" in lab
    ]
    out.check("graphics clock", bool(clock), clock[0] / 1e6 if clock else None, "present (MHz)")
    out.summary = f"{len(series)} series, scraped in {out.figures['scrape_ms']} ms"


def _parse_metrics(text: str) -> Dict[Tuple[str, str], float]:
    """(name, label text) -> value of every sample line; governor_device_up keyed by name
    alone (one device)."""
    found: Dict[Tuple[str, str], float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        name, _, labels = head.partition("{")
        try:
            number = float(value)
        except ValueError:
            continue
        key = (name, "" if name == "governor_device_up" else labels)
        found[key] = number
    return found
