#!/usr/bin/env python3
"""Convert the gpuPTXModel GTX Titan X sweeps into replay CSV files (tests/data/gpuptx_titanx).

Source: hpc-ulisboa/gpuPTXModel, ``datasets/gtxtitanx/realbenchmarks/aggregated_dataset_gtxtitanx.csv``
(Copyright (c) 2019 INESC-ID, BSD-3-Clause; the notice is kept in the output folder). That file
holds one block per application: a line with its name, then ``mem_mhz,core_mhz,time_ms,power_w,
energy_mj`` rows (16 core clocks at memory clocks 810 and 3505 MHz).

Usage: ``python scripts/import_gpuptxmodel.py AGGREGATED_CSV [OUT_DIR]``. Blocks whose name
appears twice (``stencil2d``: the repository has ``stencil2d`` and ``stencil2d_double`` folders
but the aggregated file names both ``stencil2d``) are skipped: which is which cannot be told.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEVICE = "NVIDIA GeForce GTX TITAN X (memory clock {mem} MHz)"
SOURCE = "gpuPTXModel data set (INESC-ID, BSD-3-Clause)"


def blocks(text: str):
    name, rows = None, []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if "," not in line:
            if name is not None:
                yield name, rows
            name, rows = line, []
            continue
        mem, core, time_ms, power_w, _energy = (float(x) for x in line.split(","))
        rows.append((mem, core, time_ms / 1000.0, power_w))
    if name is not None:
        yield name, rows


def main(argv) -> int:
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    src = Path(argv[1])
    out = Path(argv[2]) if len(argv) > 2 else ROOT / "tests" / "data" / "gpuptx_titanx"
    found = list(blocks(src.read_text(encoding="utf-8")))
    counts = Counter(name for name, _ in found)
    out.mkdir(parents=True, exist_ok=True)
    written = 0
    for name, rows in found:
        if counts[name] > 1:
            print(f"skipped {name}: the name appears {counts[name]} times")
            continue
        for mem in sorted({r[0] for r in rows}):
            lines = [
                f"# device: {DEVICE.format(mem=int(mem))}",
                f"# workload: {name}",
                f"# source: {SOURCE}",
                "clock_mhz,power_w,time_s",
            ]
            for _, core, time_s, power_w in sorted(r for r in rows if r[0] == mem):
                lines.append(f"{core:g},{power_w:.4f},{time_s:.6f}")
            (out / f"titanx_{name}_mem{int(mem)}.csv").write_text("\n".join(lines) + "\n")
            written += 1
    print(f"wrote {written} files to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
