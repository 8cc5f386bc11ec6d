"""``governor simulate``: a policy on a simulated board under a workload trace, in virtual time."""

from __future__ import annotations

from typing import Optional

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
        if policy in ("battery", "throughput"):
            spec["duration_s"] = duration_s  # the mission is the simulated run
    policy_from_options(spec)  # a missing or misplaced option names the option, exit 2
    doc = simulate(
        board,
        spec,
        trace,
        duration_s,
        interval_s=interval_s,
        seed=seed,
        scope=scope,
        admit=not no_admit,
    )
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
        f"mean clock        {doc['mean_clock_mhz']:.0f} MHz",
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
