"""``governor tiles --model hhc|doacross``: tiles chosen by the analytic time models.

``governor.cli.tiles`` parses the options and calls :func:`run`; this module validates them,
runs the selection (cached in the board's profile under ``tiles-hhc`` / ``tiles-doacross``)
and prints JSON (keys in specs/cli-json.md) or a table.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Optional, Tuple

from governor.errors import InvalidRequestError

__all__ = ["run"]

_SHOW = 15  # shortlist rows in the table


def _parse_size(size: Optional[str]) -> Tuple[int, ...]:
    if size is None or not str(size).strip():
        raise InvalidRequestError("--size is required (comma-separated integers, e.g. 8192,8192)")
    try:
        values = tuple(int(v) for v in str(size).replace(" ", "").split(","))
    except ValueError:
        raise InvalidRequestError(
            f"--size must be comma-separated integers, got {size!r}"
        ) from None
    if not values or any(v < 1 for v in values):
        raise InvalidRequestError(f"--size entries must be positive, got {size!r}")
    return values


def _check_common(steps: Optional[int], within: float, objective: str) -> None:
    if steps is None:
        raise InvalidRequestError("--steps is required (number of time steps)")
    if int(steps) < 1:
        raise InvalidRequestError(f"--steps must be positive, got {steps}")
    if not (0 <= float(within) < 10):
        raise InvalidRequestError(f"--within must be a fraction such as 0.10, got {within}")
    if objective not in ("time", "energy"):
        raise InvalidRequestError(f"--objective must be time or energy, not {objective!r}")


def _power_model(objective: str, board: Optional[str]) -> Any:
    if objective != "energy":
        return None
    if not board:
        raise InvalidRequestError(
            "--objective energy needs --board NAME with a calibrated power model "
            "(run `governor calibrate` first)"
        )
    from governor.tuning.analytic.energy import power_model_for_board

    return power_model_for_board(board)


def _cache_key(parts: Dict[str, Any]) -> str:
    return json.dumps(parts, sort_keys=True, separators=(",", ":"))


def _cache_get(board: str, section: str, key: str) -> Optional[Dict[str, Any]]:
    from governor.errors import ProfileError
    from governor.profiles.store import get_tuning

    try:
        hit = get_tuning(board, section, key)
    except ProfileError as err:
        if err.path is not None:
            raise  # the board's profile file is malformed: say so, do not ignore it
        return None  # a GPU name that cannot be a profile's: no cache
    return hit if isinstance(hit, dict) else None


def _cache_put(
    board: Optional[str], section: str, key: str, value: Dict[str, Any]
) -> Optional[str]:
    """Keep the choice in the board's profile, where the runtime finds it; returns the file.
    Without ``--board`` nothing is written: a GPU name (``titanx``) is no board whose profile
    anything reads, and the file it made was only a large cache."""
    from governor.errors import ProfileError
    from governor.profiles.store import put_tuning

    if board is None:
        return None
    try:
        put_tuning(board, section, key, value)
    except ProfileError as err:
        if err.path is not None:
            raise  # the board's profile file is malformed: say so, do not ignore it
        return None
    except OSError:  # a cache that cannot be written is not an error
        return None
    return _profile_file(board)


def run(
    model: str,
    stencil: Optional[str],
    nest: Optional[str],
    gpu: Optional[str],
    size: Optional[str],
    steps: Optional[int],
    within: float = 0.10,
    objective: str = "time",
    board: Optional[str] = None,
    json_out: bool = False,
) -> Optional[int]:
    """Run the HHC or DOACROSS selection and print it. Returns the exit status (0).

    Raises:
        InvalidRequestError: a missing or malformed option.
        DeviceNotFoundError: unknown stencil, nest or GPU.
        ProfileError: energy objective and the board has no calibrated power model.
    """
    model = str(model).lower()
    if model == "hhc":
        doc = _run_hhc(stencil, nest, gpu, size, steps, within, objective, board)
    elif model == "doacross":
        doc = _run_doacross(stencil, nest, gpu, size, steps, within, objective, board)
    else:
        raise InvalidRequestError(f"--model must be hhc or doacross here, not {model!r}")
    if json_out:
        from governor.cli.common import emit_json

        emit_json(doc)
    else:
        _print_table(doc)
        if doc.get("cached_in"):
            print(f"kept in the board's profile: {doc['cached_in']}")
    return 0


def _profile_file(board: Optional[str]) -> Optional[str]:
    from governor.profiles.store import profile_paths

    return str(profile_paths(board)[0]) if board else None


def _digest(doc: Any) -> str:
    import hashlib

    return hashlib.sha1(_cache_key(doc).encode()).hexdigest()[:12]


def _run_hhc(stencil, nest, gpu, size, steps, within, objective, board) -> Dict[str, Any]:
    if nest:
        raise InvalidRequestError("--nest belongs to --model doacross; HHC takes --stencil")
    if not stencil:
        raise InvalidRequestError("--model hhc needs --stencil NAME (e.g. gradient2d)")
    if not gpu and not board:
        raise InvalidRequestError(
            "--model hhc needs --gpu NAME (gtx980, titanx or titan-x) or --board NAME calibrated "
            "with `governor tiles-calibrate --model hhc`"
        )
    from governor.tuning.analytic import catalog
    from governor.tuning.analytic.device import load_hhc

    st = catalog.stencil(stencil)
    card = load_hhc(board, gpu) if board else None
    source = "calibrated" if card is not None else "thesis"
    if card is None:
        if not gpu:
            raise InvalidRequestError(
                f"board {board!r} has no calibrated HHC constants: run `governor tiles-calibrate "
                f"--model hhc --device sim:{board} --save` or pass --gpu gtx980|titanx"
            )
        card = catalog.hhc_gpu(gpu)
    dims = _parse_size(size)
    _check_common(steps, within, objective)
    if len(dims) != st.dims:
        raise InvalidRequestError(f"{st.name} is {st.dims}-D: --size needs {st.dims} integers")
    if st.name not in card.c_iter_s:
        raise InvalidRequestError(f"{card.name} has no C_iter for {st.name}; calibrate it first")
    power = _power_model(objective, board)
    key = _cache_key(
        {"stencil": st.name, "gpu": card.name, "size": dims, "steps": int(steps),
         "within": float(within), "objective": objective,
         "constants": _digest(card.to_dict())}
    )  # fmt: skip
    hit = _cache_get(board, "tiles-hhc", key) if power is None and board else None
    if hit is not None:
        return dict(hit, cached=True, cached_in=_profile_file(board))
    from governor.tuning.analytic.hhc import select_hhc

    result = select_hhc(st, card, dims, int(steps), float(within), objective, power)
    doc = dict(result.to_dict(), constants_source=source,
               reference_clock_mhz=card.reference_clock_mhz)  # fmt: skip
    saved = _cache_put(board, "tiles-hhc", key, doc) if power is None else None
    return dict(doc, cached=False, cached_in=saved)


def _run_doacross(stencil, nest, gpu, size, steps, within, objective, board) -> Dict[str, Any]:
    if stencil:
        raise InvalidRequestError("--stencil belongs to --model hhc; DOACROSS takes --nest")
    if not nest:
        raise InvalidRequestError("--model doacross needs --nest sor1d|sor2d|sor3d")
    from governor.tuning.analytic import catalog
    from governor.tuning.analytic.device import load_doacross
    from governor.tuning.analytic.doacross import doacross_search

    ns = catalog.nest(nest)
    constants = stored_gpu = ref_clock = None
    if board:
        stored = load_doacross(board, gpu)
        if stored is not None:
            constants, stored_gpu, ref_clock = stored
    card = stored_gpu or catalog.doacross_gpu(gpu or "c1060")
    dims = _parse_size(size)
    _check_common(steps, within, objective)
    if len(dims) != ns.depth - 1:
        raise InvalidRequestError(f"{ns.name} needs {ns.depth - 1} space sizes in --size")
    power = _power_model(objective, board)
    key = _cache_key(
        {"nest": ns.name, "gpu": card.name, "size": dims, "steps": int(steps),
         "objective": objective,
         "constants": _digest(constants.to_dict()) if constants else "illustrative"}
    )  # fmt: skip
    hit = _cache_get(board, "tiles-doacross", key) if power is None and board else None
    if hit is not None:
        return dict(hit, cached=True, cached_in=_profile_file(board))
    extra: Dict[str, Any] = {} if ref_clock is None else {"reference_clock_mhz": ref_clock}
    result = doacross_search(ns, card, dims, int(steps), constants, objective, power, **extra)
    doc = result.to_dict()
    saved = _cache_put(board, "tiles-doacross", key, doc) if power is None else None
    return dict(doc, cached=False, cached_in=saved)


def _tiles_text(tiles: Dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in tiles.items())


def _print_table(doc: Dict[str, Any]) -> None:
    from rich.table import Table

    from governor.cli.common import console as console_

    console = console_()
    if doc["model"] == "hhc":
        table = Table(
            title=f"HHC {doc['stencil']} on {doc['gpu']}, size {doc['size']} x {doc['steps']} "
            f"steps: {len(doc['shortlist'])} choices within {doc['within']:.0%} "
            f"(ideal {doc['ideal_time_s']:.4g} s)"
        )
        for column in ("tiles", "blocks/SM", "time (s)", "clock (MHz)", "energy (J)"):
            table.add_column(column)
        for row in doc["shortlist"][:_SHOW]:
            table.add_row(
                _tiles_text(row["tiles"]),
                str(row["blocks_per_sm"]),
                f"{row['time_s']:.4g}",
                "-" if row.get("clock_mhz") is None else f"{row['clock_mhz']:g}",
                "-" if row.get("energy_j") is None else f"{row['energy_j']:.4g}",
            )
        console.print(table)
        if len(doc["shortlist"]) > _SHOW:
            console.print(f"... {len(doc['shortlist']) - _SHOW} more (use --json for all)")
        return
    best = doc["best"]
    table = Table(title=f"DOACROSS {doc['nest']} on {doc['gpu']} ({doc['constants_source']})")
    for column in ("tiles", "block", "grid", "time (s)"):
        table.add_column(column)
    table.add_row(
        _tiles_text(best["tiles"]), str(best["block"]), str(best["grid"]), f"{best['time_s']:.4g}"
    )
    for row in doc.get("runners_up", []):
        table.add_row(_tiles_text(row["tiles"]), str(row["block"]), "", f"{row['time_s']:.4g}")
    console.print(table)
    console.print(
        f"{doc['layouts_searched']} layouts searched in {doc['search_s']:.2f} s"
        + (f"; best clock {best['clock_mhz']:g} MHz" if best.get("clock_mhz") else "")
    )
