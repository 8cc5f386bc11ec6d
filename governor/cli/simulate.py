"""``governor simulate``: a policy on a simulated board under a workload trace, in virtual time."""

from __future__ import annotations

from typing import Optional, Tuple

import typer

from governor.cli import values
from governor.cli.common import Annotated, JsonOpt, emit_json
from governor.cli.run import (
    BatteryOpt,
    CapOpt,
    ClockOpt,
    HoursOpt,
    IntervalOpt,
    PolicyOpt,
    RateOpt,
    ScopeOpt,
    UntilOpt,
    policy_from_options,
    policy_spec,
    quiet_runtime_log,
)


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate_command)


def simulate_command(
    board: Annotated[
        str, typer.Option("--board", help="A simulated board (governor devices --simulated).")
    ] = "agx-orin",
    policy: PolicyOpt = "ppw",
    cap_w: CapOpt = None,
    battery_wh: BatteryOpt = None,
    hours: HoursOpt = None,
    rate_hz: RateOpt = None,
    clock: ClockOpt = None,
    trace: Annotated[
        str,
        typer.Option(
            "--trace",
            help="steady, bursty, step, memory, memory-compute, perception-30hz, or a phase "
            "list load:weight,... (loads compute, memory, idle; e.g. compute:1,memory:1).",
        ),
    ] = "steady",
    duration_s: Annotated[
        float,
        typer.Option(
            "--duration-s",
            callback=values.number(gt=0, le=values.WEEK_S, unit="seconds"),
            help="Simulated seconds.",
        ),
    ] = 60.0,
    interval_s: IntervalOpt = 0.1,
    seed: Annotated[
        int,
        typer.Option(
            "--seed",
            callback=values.integer(ge=0, le=values.INT32_MAX),
            help="Noise and trace seed.",
        ),
    ] = 0,
    scope: ScopeOpt = None,
    until: UntilOpt = None,
    mem_clock: Annotated[
        Optional[float],
        typer.Option(
            "--mem-clock",
            callback=values.number(gt=0, le=100000.0, unit="MHz"),
            help="Pin the memory clock (MHz, snapped to the board's memory clocks; boards "
            "with several). Without it the board runs at its default memory clock.",
        ),
    ] = None,
    no_admit: Annotated[
        bool,
        typer.Option(
            "--no-admit",
            help="On perception-30hz: the app does not ask gov.admit() and runs every frame "
            "(a battery floor then degrades by clock: frames late).",
        ),
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Run a policy on a simulated board over a trace; report energy, power, cap, work, misses."""
    from governor.runtime.simulate import FRAME_RATE_HZ, simulate

    quiet_runtime_log()
    steps = duration_s / interval_s
    if trace == "perception-30hz":
        steps += duration_s * FRAME_RATE_HZ  # every camera frame is a step too
    if steps > values.MAX_SIM_STEPS:
        raise values.OptionValueError(
            f"--duration-s {duration_s:g} at --interval-s {interval_s:g} is {steps:.3g} "
            f"simulation steps; at most {values.MAX_SIM_STEPS} run in a few minutes: "
            "raise --interval-s or shorten --duration-s"
        )

    spec = policy_spec(policy, cap_w, battery_wh, hours, rate_hz, clock, scope, until)
    if battery_wh is not None and spec["hours"] is None and spec["until"] is None:
        from governor.runtime.policies import POLICIES

        if policy in POLICIES and POLICIES[policy].has_mission:
            spec["duration_s"] = duration_s  # the mission is the simulated run
    requested = policy_from_options(spec).requested_clock_mhz  # a bad option: exit 2
    if requested is not None:  # a unit slip is refused as run and apply refuse it
        from governor.devices.sim.catalog import get_board

        spec_ = get_board(board)
        values.check_clock_scale(requested, spec_.clocks_mhz, f"sim:{spec_.name}")
    mem_mhz, mem_note = _mem_clock(board, mem_clock)
    doc = simulate(
        board,
        spec,
        trace,
        duration_s,
        interval_s=interval_s,
        seed=seed,
        scope=scope,
        admit=not no_admit,
        mem_clock_mhz=None if mem_clock is None else mem_mhz,  # a lock: the core-only baseline
    )
    doc["board"] = board
    # the mean memory clock the run ran at: the pinned one, the board's default, or what the
    # battery policy chose beside the core clock
    mean_mem = doc.pop("mean_mem_clock_mhz")
    doc["mem_clock_mhz"] = round(mean_mem, 1) if mem_mhz is not None and mean_mem else None
    if mem_note:
        doc["notes"] = [mem_note] + list(doc["notes"])
    if json_out:
        for note in doc["notes"]:
            typer.echo(f"governor: {note}", err=True)
        emit_json(doc)
        return
    lines = [
        f"{board}: {doc['policy']} over {trace} for {doc['duration_s']:.0f} s ({doc['scope']} power)",
        f"energy            {doc['energy_j']:.1f} J "
        f"(board input {doc['board_energy_j']:.1f} J, GPU {doc['gpu_energy_j']:.1f} J)",
        f"mean / max power  {doc['mean_power_w']:.2f} / {doc['max_power_w']:.2f} W",
        f"mean clock        {doc['mean_clock_mhz']:.0f} MHz"
        + (f" (memory {mem_mhz:g} MHz)" if mem_mhz is not None else ""),
        f"work done         {doc['work_done']:.1f} units",
    ]
    cap: Optional[float] = doc.get("cap_w")
    if cap is not None:
        lines.append(
            f"time above cap    {doc['time_above_cap_s']:.1f} s (1-s average above {cap:g} W)"
        )
    if trace == "perception-30hz":
        lines.append(f"deadline misses   {doc['deadline_misses']} of {doc['frames']} frames")
        if doc["frames_skipped"]:
            lines.append(
                f"frames skipped    {doc['frames_skipped']} (gov.admit(): the budget's share)"
            )
    if doc.get("rate_degraded_s"):
        lines.append(f"rate degraded     {doc['rate_degraded_s']:.1f} s (the battery floor)")
    if "lasted_s" in doc:
        lines.append(f"budget lasted     {doc['lasted_s']:.0f} of {doc['target_s']:.0f} s")
    for note in doc["notes"]:
        lines.append(f"note: {note}")
    typer.echo("\n".join(lines))


def _mem_clock(board: str, wanted_mhz: Optional[float]) -> Tuple[Optional[float], str]:
    """The memory clock the run uses (MHz; None on a board without one) and a note when the
    one asked for was snapped to the board's table.

    Raises:
        InvalidRequestError: ``--mem-clock`` on a board with one memory clock, or outside
            its range.
    """
    from governor.devices.sim.catalog import get_board
    from governor.errors import InvalidRequestError

    spec = get_board(board)
    table = list(spec.mem_clocks_mhz)
    if wanted_mhz is None:
        return spec.default_mem_clock_mhz, ""
    if len(table) < 2:
        raise InvalidRequestError(
            f"sim:{board} has {'one memory clock' if table else 'no memory clock'}: "
            "--mem-clock needs a board with several (governor devices --simulated)"
        )
    lo, hi = table[0], table[-1]
    if not (lo - 1.0 <= wanted_mhz <= hi + 1.0):
        raise InvalidRequestError(
            f"memory clock {wanted_mhz:g} MHz is outside the range {lo:g}-{hi:g} MHz of sim:{board}"
        )
    nearest = min(table, key=lambda m: abs(m - wanted_mhz))
    if abs(nearest - wanted_mhz) > 1e-6:
        return nearest, f"memory clock {wanted_mhz:g} MHz snapped to {nearest:g} MHz"
    return nearest, ""
