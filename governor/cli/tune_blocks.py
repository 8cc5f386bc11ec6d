"""``governor tune-blocks``: choose thread-block sizes and a clock (Lopes et al., Alg. 1-4).

Three sources of measurements: a simulated board running model kernels (``--device sim:NAME
--kernel NAME ...``; several ``--kernel`` run concurrently), a recorded Kernel Tuner cache
(``--recorded PATH``), or a command run on a device (``--command "CMD {block}"``). On
simulated and recorded data the exhaustive optimum is printed beside the choice.
"""

from __future__ import annotations

import enum
import re
from typing import Any, Dict, List, Optional

import typer

from governor.cli import values
from governor.cli.common import Annotated, DeviceOpt, JsonOpt, emit_json


class Objective(str, enum.Enum):
    energy = "energy"
    time = "time"


def register(app: typer.Typer) -> None:
    app.command("tune-blocks")(tune_blocks)


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug or "board"


def tune_blocks(
    device: DeviceOpt = "sim:a100-pcie",
    kernel: Annotated[
        Optional[List[str]],
        typer.Option(
            "--kernel",
            "-k",
            help="Simulated kernel (repeat for concurrent kernels): vector-add, stencil-2d, gemm-tile, reduce, nbody.",
        ),
    ] = None,
    recorded: Annotated[
        Optional[str], typer.Option("--recorded", help="A Kernel Tuner cache JSON to tune over.")
    ] = None,
    command: Annotated[
        Optional[str],
        typer.Option(
            "--command",
            help="Command with {block} (or {bx} {by} {bz}) placeholders, run per point.",
        ),
    ] = None,
    cc: Annotated[
        Optional[str],
        typer.Option("--cc", help="Compute capability (default: from the board or recording)."),
    ] = None,
    registers: Annotated[
        int,
        typer.Option(
            "--registers",
            callback=values.integer(ge=0, le=255),
            help="Registers per thread (--recorded/--command).",
        ),
    ] = 0,
    shared_bytes: Annotated[
        int,
        typer.Option(
            "--shared-bytes",
            callback=values.integer(ge=0, le=values.MAX_SHARED_BYTES, unit="bytes"),
            help="Static shared memory per block (B).",
        ),
    ] = 0,
    shared_per_thread: Annotated[
        int,
        typer.Option(
            "--shared-per-thread",
            callback=values.integer(ge=0, le=values.MAX_SHARED_BYTES, unit="bytes"),
            help="Dynamic shared memory per thread (B).",
        ),
    ] = 0,
    objective: Annotated[
        Objective, typer.Option("--objective", help="energy (Alg. 2/4) or time (Alg. 1/3).")
    ] = Objective.energy,
    threshold: Annotated[
        float,
        typer.Option(
            "--threshold",
            callback=values.number(ge=0, le=1),
            help="Keep blocks with occupancy >= this.",
        ),
    ] = 0.8,
    start_clock: Annotated[
        Optional[float],
        typer.Option(
            "--start-clock",
            callback=values.policy_number("clock_mhz"),
            help="Start the clock walk here (MHz); default: the profile's PPW-optimal clock, else the top.",
        ),
    ] = None,
    from_top: Annotated[
        bool,
        typer.Option("--from-top", help="Ignore the calibrated clock; start at the top clock."),
    ] = False,
    save: Annotated[
        bool, typer.Option("--save", help="Store the choice in the board's profile.")
    ] = False,
    board: Annotated[
        Optional[str],
        typer.Option("--board", help="Profile name for --save (default: the device's model)."),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Choose block sizes (and a clock, for energy) in a few measurements."""
    from governor.errors import InvalidRequestError
    from governor.tuning.blocks import (
        KernelResources,
        exhaustive,
        rank_candidates,
        tune_energy_multi,
        tune_time_multi,
    )
    from governor.tuning.blocks.cache import choice_key, ppw_start_clock_mhz, save_choice

    if recorded and command:
        raise InvalidRequestError("give --recorded or --command, not both")
    dev = None
    exhaustive_blocks = None
    names: List[str]
    try:
        if recorded:
            from governor.tuning.blocks.bench import RecordedBench, guess_cc

            bench: Any = RecordedBench(recorded)
            cc = cc or guess_cc(bench.device_name)
            if cc is None:
                raise InvalidRequestError(
                    f"cannot tell the compute capability of {bench.device_name!r}; pass --cc"
                )
            names = [bench.kernel_name]
            res = KernelResources(registers, shared_bytes, shared_per_thread)
            candidates = [rank_candidates(cc, res, bench.blocks(), threshold)]
            exhaustive_blocks = [bench.blocks()]
            board_name = board or _slug(bench.device_name)
            source = f"recorded:{recorded}"
        else:
            from governor.devices.registry import open_device

            dev = open_device(device)
            model = getattr(dev.identity, "model", "") or _slug(dev.identity.name)
            board_name = board or model
            facts = getattr(getattr(dev, "board", None), "facts", {}) or {}
            cc = cc or (str(facts["cc"]) if "cc" in facts else None)
            if cc is None:
                raise InvalidRequestError(
                    f"cannot tell the compute capability of {dev.identity.name}; pass --cc"
                )
            source = dev.uri
            if command:
                from governor.tuning.blocks.bench import CommandBench

                if dev.clock.virtual:
                    raise InvalidRequestError(
                        f"--command times a real program, but {dev.uri} runs on virtual time; "
                        f"use a real GPU, or {dev.uri.split('?')[0]}?realtime=1"
                    )
                bench = CommandBench(dev, command)
                names = [command.split()[0] if command.split() else "command"]
                res = KernelResources(registers, shared_bytes, shared_per_thread)
                candidates = [rank_candidates(cc, res, None, threshold)]
            else:
                from governor.tuning.blocks.bench import SimBench
                from governor.tuning.blocks.candidates import default_blocks
                from governor.tuning.blocks.simkernels import kernel_by_name

                models = [kernel_by_name(k) for k in (kernel or ["vector-add"])]
                bench = SimBench(dev, models)
                names = [m.name for m in models]
                candidates = []
                exhaustive_blocks = []
                for m in models:
                    r = KernelResources(
                        m.registers_per_thread, m.static_shared_bytes, m.shared_bytes_per_thread
                    )
                    candidates.append(rank_candidates(cc, r, None, threshold))
                    exhaustive_blocks.append(
                        [c.block for c in rank_candidates(cc, r, default_blocks(), 0.0)]
                    )
        start = start_clock
        if start is None and not from_top and objective is Objective.energy:
            start = ppw_start_clock_mhz(board_name)
        if objective is Objective.energy:
            result = tune_energy_multi(bench, candidates, start_clock_mhz=start)
        else:
            result = tune_time_multi(bench, candidates, clock_mhz=start_clock)
        best = exhaustive(bench, exhaustive_blocks, objective.value) if exhaustive_blocks else None
        truth = None
        if best is not None and hasattr(bench, "truth"):
            point = bench.truth(result.blocks, result.clock_mhz)
            truth = {"time_s": point.time_s, "energy_j": point.energy_j}
        saved = None
        if save:
            saved = str(
                save_choice(
                    board_name,
                    choice_key(names, objective.value),
                    result,
                    {"source": source, "cc": cc},
                )
            )
    finally:
        if dev is not None:
            dev.restore()
            dev.close()
    doc: Dict[str, Any] = dict(result.to_dict())
    doc.update(
        {
            "source": source,
            "board": board_name,
            "compute_capability": cc,
            "objective": objective.value,
            "kernels": names,
            "start_clock_mhz": start,
            "candidates": [len(c) for c in candidates],
            "exhaustive": best.to_dict() if best is not None else None,
            "chosen_truth": truth,
            "saved_to": saved,
        }
    )
    if best is not None:
        mine = (truth or doc)["energy_j" if objective is Objective.energy else "time_s"]
        ref = best.energy_j if objective is Objective.energy else best.time_s
        doc["gap_pct"] = 100.0 * (mine / ref - 1.0)
    if json_out:
        emit_json(doc)
        return
    _print(doc)


def _print(doc: Dict[str, Any]) -> None:
    lines = [
        f"{doc['procedure']} on {doc['source']} (CC {doc['compute_capability']}), kernels: {', '.join(doc['kernels'])}",
        f"chosen      blocks {' '.join(doc['block_labels'])} at {doc['clock_mhz']:g} MHz: "
        f"{doc['time_s'] * 1e3:.4g} ms, {doc['energy_j']:.4g} J per run, {doc['measurements']} measurements",
    ]
    ex = doc.get("exhaustive")
    if ex:
        lines.append(
            f"exhaustive  blocks {' '.join(ex['block_labels'])} at {ex['clock_mhz']:g} MHz: "
            f"{ex['time_s'] * 1e3:.4g} ms, {ex['energy_j']:.4g} J per run, {ex['measurements']} measurements"
        )
        lines.append(f"gap         {doc['gap_pct']:+.2f} % ({doc['objective']})")
    if doc.get("saved_to"):
        lines.append(f"saved to    {doc['saved_to']}")
    typer.echo("\n".join(lines))
