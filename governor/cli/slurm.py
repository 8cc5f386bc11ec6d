"""``governor slurm prolog|epilog``: what deploy/slurm/prolog.sh and epilog.sh run.

Both read the job from Slurm's environment and the settings from the environment and
``/etc/governor/slurm.conf`` (see :mod:`governor.fleet.slurm`). Their exit status is what
slurmd sees: 0, or 1 on a failure when ``GOVERNOR_STRICT=1`` (a failing prolog drains the
node). ``governor slurm show JOB`` prints a finished job's record.
"""

from __future__ import annotations

import typer

from governor._compat import json_loads
from governor.cli.common import Annotated, JsonOpt, emit_json


def register(app: typer.Typer) -> None:
    slurm_app = typer.Typer(
        help="Slurm prolog/epilog: set each job's GPUs to the site policy and record its energy.",
        add_completion=False,
        no_args_is_help=True,
    )
    slurm_app.command("prolog")(prolog)
    slurm_app.command("epilog")(epilog)
    slurm_app.command("show")(show)
    app.add_typer(slurm_app, name="slurm")


def prolog() -> None:
    """Before a job (as root, from slurmd): set its GPUs and record their energy counters."""
    from governor.fleet.slurm import prolog as run

    raise typer.Exit(run())


def epilog() -> None:
    """After a job: record its energy per GPU, restore the GPUs, write the job's JSON file."""
    from governor.fleet.slurm import epilog as run

    raise typer.Exit(run())


def show(
    job: Annotated[str, typer.Argument(help="The job id.")],
    json_out: JsonOpt = False,
) -> None:
    """Print the record the epilog wrote for JOB (from GOVERNOR_RECORD_DIR)."""
    from governor.errors import InvalidRequestError
    from governor.fleet.slurm import job_record_path, load_settings

    settings = load_settings()
    path = job_record_path(settings, job)  # only the record directory is needed here
    try:
        doc = json_loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise InvalidRequestError(f"no record of job {job} in {path.parent}: {err}") from None
    if json_out:
        emit_json(doc)
        return
    typer.echo(f"job {doc.get('job_id')}: {doc.get('energy_j')} J, policy {doc.get('policy')}")
    for gpu in doc.get("gpus", []):
        clocks = gpu.get("clocks_mhz")
        if not clocks:
            clock = "driver default"
        elif clocks[0] == clocks[1]:
            clock = f"{clocks[0]:g} MHz"
        else:
            clock = f"{clocks[0]:g}-{clocks[1]:g} MHz"
        typer.echo(f"  {gpu.get('uuid')} ({gpu.get('name')}): {gpu.get('energy_j')} J at {clock}")
