"""A digest of the kernel tables and their cost model at the default memory clock.

For every library kernel in both precisions on the boards named (default: nano, agx-orin,
orin-nano, titan-x, a100-sxm, xavier-nx): ``best_table``'s configuration and energy at each
clock (what a reader of ``clocks_mhz``/``index``/``energy_j`` answers: the table at the
default memory clock) and every candidate's ``run_cost`` at every clock with no memory clock
named. Printed per board and over all; the same digest before and after a change to the
cost model proves the single-knob tables did not move (docs/tiles.md, "The memory axis").

    python scripts/kernel_table_digest.py [BOARD ...]

Needs NVRTC (extra nvrtc) to compile the candidates.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from governor.devices.sim.catalog import get_board  # noqa: E402
from governor.kernels.operating_points import best_table, candidates, run_cost  # noqa: E402
from governor.kernels.templates import KERNELS  # noqa: E402

BOARDS = ["nano", "agx-orin", "orin-nano", "titan-x", "a100-sxm", "xavier-nx"]
KEYS = ("kernel", "board", "precision", "clocks_mhz", "energy_j")


def board_blobs(board: str):
    spec = get_board(board)
    for kernel in sorted(KERNELS):
        for precision in ("double", "single"):
            try:
                table = best_table(kernel, board, precision).to_dict()
                doc = {k: table[k] for k in KEYS}
                doc["per_clock"] = [table["configs"][i] for i in table["index"]]
            except Exception as err:  # a kernel that does not build is part of the digest
                doc = {"error": type(err).__name__ + str(err)}
            try:
                costs = [
                    [run_cost(spec, c, f) for f in spec.clocks_mhz]
                    for c in candidates(kernel, board, precision)
                ]
            except Exception as err:
                costs = [type(err).__name__]
            yield json.dumps({"table": doc, "costs": costs}, sort_keys=True).encode()


def main() -> int:
    boards = sys.argv[1:] or BOARDS
    everything = hashlib.sha256()
    for board in boards:
        one = hashlib.sha256()
        for blob in board_blobs(board):
            one.update(blob)
            everything.update(blob)
        print(board, one.hexdigest()[:16], flush=True)
    print("all", everything.hexdigest())
    return 0


if __name__ == "__main__":
    sys.exit(main())
