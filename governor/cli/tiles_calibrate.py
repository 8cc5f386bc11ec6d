"""``governor tiles-calibrate``: calibrate the HHC or DOACROSS constants on a device.

Runs the micro-benchmark procedures of ``governor.tuning.analytic.calibrate`` on the device
(simulated boards today) at one locked clock and, with ``--save``, keeps the fitted constants
in the board's profile (``tuning/hhc-constants/<board>``, ``tuning/doacross-constants/<board>``)
where ``governor tiles --model hhc|doacross --board <board>`` reads them back.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import typer

from governor.cli import values
from governor.cli.common import Annotated, DeviceOpt, JsonOpt, emit_json

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    app.command("tiles-calibrate")(tiles_calibrate_cmd)


def tiles_calibrate_cmd(
    model: Annotated[str, typer.Option("--model", help="hhc or doacross.")],
    device: DeviceOpt = "auto",
    clock: Annotated[
        Optional[float],
        typer.Option(
            "--clock",
            callback=values.policy_number("clock_mhz"),
            help="GPU clock to calibrate at (MHz; default: the top clock).",
        ),
    ] = None,
    nest: Annotated[
        str, typer.Option("--nest", help="DOACROSS: nest whose reduced runs fit α, β, γ.")
    ] = "sor2d",
    threads: Annotated[
        Optional[str],
        typer.Option(
            "--threads",
            callback=values.integers(le=1024, most=32),
            help="DOACROSS: thread counts to fit, e.g. 64,128,256.",
        ),
    ] = None,
    save: Annotated[
        bool, typer.Option("--save", help="Keep the constants in the board's profile.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Calibrate the analytic tile models' constants (HHC or DOACROSS) on a device."""
    from governor.devices.registry import open_device
    from governor.errors import InvalidRequestError
    from governor.tuning.analytic.device import calibrate_device, store_constants, stored_value

    model = str(model).strip().lower()
    if model not in ("hhc", "doacross"):
        raise InvalidRequestError(f"--model must be hhc or doacross, not {model!r}")
    # --threads is checked by its option (values.integers)
    counts = None if threads is None else [int(t) for t in threads.replace(" ", "").split(",")]
    dev = open_device(device)
    try:
        result = calibrate_device(dev, model, clock_mhz=clock, nest=nest, thread_counts=counts)
    finally:
        close = getattr(dev, "close", None)
        if callable(close):
            close()
    doc: Dict[str, Any] = {
        "model": model,
        "board": result["board"],
        "device": result["device"],
        "clock_mhz": result["clock_mhz"],
        "kernel_runs": result["kernel_runs"],
        "constants": stored_value(result),
        "saved": None,
    }
    if save:
        path = store_constants(result)
        doc["saved"] = {"path": str(path), "section": f"{model}-constants", "key": result["board"]}
    if json_out:
        emit_json(doc)
        return
    _print(doc)


def _print(doc: Dict[str, Any]) -> None:
    c = doc["constants"]
    lines = [
        f"{doc['model'].upper()} constants of {doc['board']} at {doc['clock_mhz']:g} MHz "
        f"({doc['kernel_runs']} kernel runs on {doc['device']})"
    ]
    if doc["model"] == "hhc":
        lines.append(
            f"  L {c['l_s_per_gb']:.4g} s/GB   tau_sync {c['tau_sync_s']:.4g} s   "
            f"T_sync {c['t_sync_s']:.4g} s"
        )
        for name, value in sorted(c["c_iter_s"].items()):
            lines.append(f"  C_iter {name:<12} {value:.4g} s")
    else:
        lines.append(
            f"  sigma_ker {c['sigma_ker_s']:.4g} s; sigma_blk at {len(c['sigma_blk_s'])} grid sizes"
        )
        for t, org in c["per_threads"].items():
            lines.append(
                f"  {t:>5} threads: alpha {org['alpha_s']:.3g}  beta {org['beta_s']:.3g}  "
                f"gamma {org['gamma_s']:.3g}  sigma_thd {org['sigma_thd_s']:.3g} s"
            )
    saved = doc.get("saved")
    lines.append(
        f"saved in {saved['path']} (tuning/{saved['section']}/{saved['key']})"
        if saved
        else "not saved (use --save to keep them in the board's profile)"
    )
    typer.echo("\n".join(lines))
