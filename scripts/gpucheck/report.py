"""``report.json`` and ``report.md`` of a GPU check (the Markdown pastes into docs/hardware.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Sequence

from gpucheck.core import StepRecord

__all__ = ["markdown", "results_row", "write_report"]


def write_report(out_dir: Path, header: Dict[str, Any], records: Sequence[StepRecord]) -> Path:
    """Write ``report.json`` and ``report.md`` into ``out_dir``; returns the JSON's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    doc = dict(header)
    doc["steps"] = [r.to_dict() for r in records]
    doc["counts"] = {s: sum(r.status == s for r in records) for s in ("pass", "fail", "skip")}
    path = out_dir / "report.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    (out_dir / "report.md").write_text(markdown(doc), encoding="utf-8")
    return path


def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _value(value: Any) -> str:
    if isinstance(value, dict) and not value:
        return "none"
    if isinstance(value, dict):
        return ", ".join(f"{k} {_value(v)}" for k, v in value.items())
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def markdown(doc: Dict[str, Any]) -> str:
    """The report as Markdown: who and what, one row per step, then every check."""
    gpu = doc.get("gpu") or {}
    control = doc.get("control") or {}
    lines: List[str] = [
        f"### {gpu.get('name', 'GPU')}: {doc.get('date', '')}",
        "",
        f"- GPU: {gpu.get('name')} (`{gpu.get('uuid')}`), driver {gpu.get('driver_version')}",
        f"- software: {doc.get('software', {}).get('summary', '')}",
        f"- command: `{doc.get('command', '')}`",
        "- control: "
        + ("permitted" if control.get("permitted") else f"read-only ({control.get('reason')})"),
        f"- run: {doc.get('wall_s')} s; {doc.get('counts', {})}; final reset: "
        f"{_value(doc.get('final_reset'))}",
        "",
        "| step | status | read-only | figures | reason |",
        "|---|---|---|---|---|",
    ]
    for step in doc.get("steps", []):
        lines.append(
            f"| {step['name']} | {step['status']} | {'yes' if step['read_only'] else 'no'} | "
            f"{_cell(step.get('summary', ''))} | {_cell(step.get('reason', ''))} |"
        )
    lines += ["", "The row for the results table of docs/hardware.md:", "", results_row(doc)]
    lines += ["", "| step | check | measured | tolerance | ok |", "|---|---|---|---|---|"]
    for step in doc.get("steps", []):
        for check in step.get("checks", []):
            lines.append(
                f"| {step['name']} | {_cell(check['name'])} | {_cell(_value(check['value']))} | "
                f"{_cell(check['tolerance'])} | {'yes' if check['ok'] else '**no**'} |"
            )
    return "\n".join(lines) + "\n"


def _figure(doc: Dict[str, Any], step: str, *path: str) -> Any:
    for found in doc.get("steps", []):
        if found["name"] == step:
            value: Any = found.get("figures", {})
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            return value
    return None


def results_row(doc: Dict[str, Any]) -> str:
    """One row of docs/hardware.md's results table: GPU, driver, date, command, control,
    calibrated over best (compute, memory), energy windows over the counter, tune-blocks'
    energy over the default, the kernels' median gain, failed steps."""
    gpu = doc.get("gpu") or {}
    control = doc.get("control") or {}
    ratios = [
        _figure(doc, "calibration", kind, "chosen_over_best") for kind in ("compute", "memory")
    ]
    windows = [
        w.get("window_over_counter") for w in _figure(doc, "energy-windows", "windows") or []
    ]
    windows = [w for w in windows if w is not None]
    failed = [s["name"] for s in doc.get("steps", []) if s["status"] == "fail"]
    cells = [
        gpu.get("name"),
        gpu.get("driver_version"),
        doc.get("date"),
        f"`{doc.get('command', '')}`",
        "yes" if control.get("permitted") else "read-only",
        ", ".join("-" if r is None else f"{r:.3g}" for r in ratios),
        f"{min(windows):.3g}-{max(windows):.3g}" if windows else "-",
        _value(_figure(doc, "tune-blocks", "energy_chosen_over_default") or "-"),
        _value(_figure(doc, "kernels", "median_gain") or "-"),
        ", ".join(failed) or "none",
    ]
    return "| " + " | ".join(_cell(c) for c in cells) + " |"
