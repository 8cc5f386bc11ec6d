"""``governor cluster``: one power budget (W) for a whole cluster's GPUs.

``governor cluster --budget-w W`` runs the budget service on Slurm
(:mod:`governor.fleet.cluster_service`); ``governor cluster simulate`` tries the same
allocation on simulated GPUs and jobs (:mod:`governor.fleet.cluster_sim`) against static
splits of the budget.
"""

from __future__ import annotations

import sys
from typing import Optional

import typer

from governor.cli import values
from governor.cli.common import Annotated, JsonOpt, emit_json


def register(app: typer.Typer) -> None:
    cluster_app = typer.Typer(
        help="Split one power budget across a cluster's GPUs where a watt buys the most work.",
        add_completion=False,
        invoke_without_command=True,
    )
    cluster_app.callback(invoke_without_command=True)(service)
    cluster_app.command("simulate")(simulate)
    app.add_typer(cluster_app, name="cluster")


def service(
    ctx: typer.Context,
    budget_w: Annotated[
        Optional[float],
        typer.Option(
            "--budget-w",
            callback=values.number(gt=0, unit="watts"),
            help="The cluster's power budget (W), split across the GPUs of the running jobs.",
        ),
    ] = None,
    partition: Annotated[
        Optional[str],
        typer.Option("--partition", help="Only this Slurm partition's nodes (default: all)."),
    ] = None,
    period_s: Annotated[
        float,
        typer.Option(
            "--period-s",
            callback=values.number(ge=1, le=values.HOUR_S, unit="seconds"),
            help="Seconds between rebalances (also on every job start and end).",
        ),
    ] = 30.0,
    daemon_socket: Annotated[
        str,
        typer.Option(
            "--daemon-socket",
            help="Each node's daemon socket; {node} is the Slurm node name (a socket "
            "forwarded from the node, or the daemon's own on a one-host cluster).",
        ),
    ] = "/run/governor/nodes/{node}.sock",
    lease_s: Annotated[
        Optional[float],
        typer.Option(
            "--lease-s",
            callback=values.number(ge=1, le=values.HOUR_S, unit="seconds"),
            help="How long a node keeps its caps without hearing from the service, then "
            "falls back to a safe share (default: 3 periods).",
        ),
    ] = None,
    metrics_listen: Annotated[
        Optional[str],
        typer.Option(
            "--metrics-listen",
            help="Serve Prometheus metrics (budget, per-GPU cap and power) on ADDR:PORT.",
        ),
    ] = None,
) -> None:
    """Run the cluster budget service on Slurm (or a subcommand: simulate)."""
    if ctx.invoked_subcommand is not None:
        return
    if budget_w is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(2)
    try:
        from governor.fleet.cluster_service import run_service
    except ImportError:
        sys.stderr.write(
            "governor: error: the cluster budget service is not in this build "
            "(governor.fleet.cluster_service is missing); try 'governor cluster simulate'\n"
        )
        raise typer.Exit(1) from None
    from governor.fleet.allocate import BudgetTooSmallError

    try:
        status = run_service(
            budget_w=budget_w,
            partition=partition,
            period_s=period_s,
            daemon_socket=daemon_socket,
            lease_s=lease_s,
            metrics_listen=metrics_listen,
        )
    except BudgetTooSmallError as err:
        sys.stderr.write(f"governor: error: {err}\n")
        raise typer.Exit(2) from None
    raise typer.Exit(status)


def simulate(
    gpus: Annotated[
        str,
        typer.Option(
            "--gpus",
            help="Simulated GPUs as BOARD:COUNT,... (catalog boards: governor devices "
            "--simulated), e.g. a100-sxm:8,t4:8.",
        ),
    ] = "a100-sxm:8,t4:8",
    jobs: Annotated[
        str,
        typer.Option(
            "--jobs",
            help="Jobs as KIND:COUNT,... with kinds compute, memory, mixed, bursty, "
            "e.g. compute:6,memory:6,bursty:4.",
        ),
    ] = "compute:6,memory:6,bursty:4",
    budget_w: Annotated[
        Optional[float],
        typer.Option(
            "--budget-w",
            callback=values.number(gt=0, unit="watts"),
            help="The cluster's power budget (W); default: 65 % of the GPUs' top caps.",
        ),
    ] = None,
    duration_s: Annotated[
        float,
        typer.Option(
            "--duration-s",
            callback=values.number(ge=1, le=values.WEEK_S, unit="seconds"),
            help="Simulated seconds (sampled every second).",
        ),
    ] = 3600.0,
    period_s: Annotated[
        float,
        typer.Option(
            "--period-s",
            callback=values.number(ge=1, le=values.HOUR_S, unit="seconds"),
            help="Seconds between the controller's rebalances (also on every job start/end).",
        ),
    ] = 10.0,
    seed: Annotated[
        int,
        typer.Option(
            "--seed",
            callback=values.integer(ge=0, le=values.INT32_MAX),
            help="Seed of the jobs' arrivals, lengths, loads and the measurement noise.",
        ),
    ] = 0,
    json_out: JsonOpt = False,
) -> None:
    """Simulate a cluster under a power budget: the controller against static splits."""
    from governor.cli.common import report_error
    from governor.devices.sim.catalog import board_names
    from governor.errors import GovernorError
    from governor.fleet.cluster_sim import JOB_KINDS, parse_counts, simulate_cluster

    try:
        gpu_counts = parse_counts(gpus, sorted(board_names()), "board")
        job_counts = parse_counts(jobs, list(JOB_KINDS), "job kind")
        if budget_w is None:
            from governor.devices.sim.catalog import get_board

            top = 0.0
            for name, n in gpu_counts:
                board = get_board(name)
                top += n * (board.power_limit_range_w or (0.0, board.power_limit_w))[1]
            budget_w = 0.65 * top
        result = simulate_cluster(
            gpu_counts, job_counts, budget_w, duration_s, seed=seed, period_s=period_s
        )
    except (GovernorError, ValueError) as err:
        report_error(str(err), json_out)
        raise typer.Exit(2) from None
    if json_out:
        emit_json(result)
        return
    r = result
    typer.echo(
        f"{sum(r.gpus.values())} GPUs ({', '.join(f'{k}:{v}' for k, v in r.gpus.items())}), "
        f"{r.jobs_run} jobs run, budget {r.budget_w:.0f} W "
        f"({100 * r.budget_w / r.top_power_w:.0f} % of {r.top_power_w:.0f} W top), "
        f"{r.duration_s:.0f} s"
    )
    typer.echo(f"work, controller:        {r.work:12.0f}")
    for label, value in (
        ("uniform caps", r.work_uniform),
        ("uniform caps, filled", r.work_uniform_filled),
        ("proportional caps", r.work_proportional),
        ("best static (hindsight)", r.work_best_static),
    ):
        typer.echo(f"work, {label + ':':<24}{value:7.0f}  controller x{r.work / value:.3f}")
    typer.echo(
        f"peak summed power {r.peak_power_w:.0f} W, peak summed caps {r.peak_caps_w:.0f} W, "
        f"budget {r.budget_w:.0f} W ({r.samples_over_budget} samples over)"
    )
