"""A kernel configuration per operating point: the best tile and thread block at each clock.

Offline, for one library kernel on one simulated board, every candidate configuration (the
selector's tiles and EATSS's next best, PPCG's default, each at 64 to 512 threads per block)
is compiled with NVRTC for its registers and shared memory, then timed and costed at every
clock of the board's table with the block-size model (``governor.tuning.blocks.simkernels``:
occupancy, waves, the board's roofline law and power physics). A configuration's memory time
scales with its global-memory traffic per point, which its tiles set:

- gemm: ``1/tile_i + 1/tile_j`` (A is re-read once per column of tiles, B once per row);
- stencils: ``(tile + 2 halo) / tile`` per dimension, plus one write;

(each kernel's description's ``traffic``). The kernel's memory share at its selected
configuration (the description's ``memory_share``) is an assumption per kernel, stated
there, not a measurement. The table keeps, for every clock, the
configuration with the least energy per run (the most work per joule); at run time
:meth:`ConfigTable.at` answers with one dict lookup.

The memory axis: on a board with several memory clocks (the Jetsons' EMC rates, the Titan
X's two), the table holds the best configuration at every (core, memory) pair
(``mem_clocks_mhz``, ``mem_index``: one row per memory clock); a candidate's memory time
follows the board's memory law at that memory clock (:func:`run_cost`,
``simkernels.mem_time_scale``). ``clocks_mhz``/``index``/``energy_j`` stay the table at the
board's default memory clock, so a table written before the axis (or read by code that knows
none) answers as it always did, and :meth:`ConfigTable.at` without a memory clock answers
for the default one.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from governor.errors import InvalidRequestError, ProfileError
from governor.kernels.description import descriptions
from governor.kernels.mapping import LaunchError, LaunchPlan, block_threads, find_template

if TYPE_CHECKING:
    from pathlib import Path

    from governor.devices.sim.physics import BoardSpec
    from governor.tuning.blocks.simkernels import KernelModel

__all__ = [
    "MEMORY_SHARE",
    "SECTION",
    "Candidate",
    "ConfigTable",
    "KernelConfig",
    "best_table",
    "candidate_plans",
    "candidates",
    "load_table",
    "save_table",
    "table_key",
]

SECTION = "kernel_configs"
THREAD_TARGETS = (64, 128, 256, 512)
# share of the run spent on memory at the selected configuration, top clock (assumed), and
# points of the modelled problem: both from each kernel's description
MEMORY_SHARE = {name: k.memory_share for name, k in descriptions().items()}
PROBLEM_POINTS = {name: k.problem_points for name, k in descriptions().items()}
WORK_S = 0.01  # the run's time at the selected configuration and top clock; ratios only


@dataclass(frozen=True)
class KernelConfig:
    """One launchable configuration: tile, thread block, precision, carveout and the
    compiler's figures. ``to_dict``/``from_dict`` round-trip it; :meth:`plan` (and
    :func:`governor.kernels.build_launch`) turn it back into a launch."""

    tile: Dict[str, int]
    thread_block: Tuple[int, int, int]
    registers_per_thread: int
    shared_memory_bytes: int
    work_per_thread: int = 1  # points each thread covers (LaunchPlan.work_per_thread)
    kernel: str = ""  # the library kernel ("" in a table's entry: the table's kernel)
    precision: str = "double"
    carveout_percent: int = 0  # the shared-memory carveout the launch asks for

    @property
    def threads_per_block(self) -> int:
        return block_threads(self.thread_block)

    def plan(self) -> LaunchPlan:
        """The launch plan this configuration was made from.

        Raises:
            InvalidRequestError: no kernel named, or tiles the kernel does not take.
        """
        if not self.kernel:
            raise InvalidRequestError(
                "the kernel configuration names no kernel (a table entry read without its "
                "table): give kernel="
            )
        template = find_template(self.kernel)
        missing = [loop for loop in template.loops if loop not in self.tile]
        if missing or len(self.tile) != len(template.loops):
            raise InvalidRequestError(
                f"{self.kernel} takes tiles for loops {', '.join(template.loops)}, "
                f"not {', '.join(self.tile)}"
            )
        return LaunchPlan(
            kernel=self.kernel,
            tiles={loop: int(self.tile[loop]) for loop in template.loops},
            thread_block=self.thread_block,
            work_per_thread=self.work_per_thread,
            shared_memory_bytes=self.shared_memory_bytes,
            carveout_percent=self.carveout_percent,
            precision=self.precision,
        )

    @classmethod
    def from_plan(
        cls, plan: LaunchPlan, registers_per_thread: int = 0, shared_memory_bytes: int = -1
    ) -> KernelConfig:
        """The configuration of ``plan`` (the compiler's figures where known: registers 0
        and the source's declared shared memory stand in otherwise)."""
        return cls(
            tile=dict(plan.tiles),
            thread_block=plan.thread_block,
            registers_per_thread=registers_per_thread,
            shared_memory_bytes=(
                plan.shared_memory_bytes if shared_memory_bytes < 0 else shared_memory_bytes
            ),
            work_per_thread=plan.work_per_thread,
            kernel=plan.kernel,
            precision=plan.precision,
            carveout_percent=plan.carveout_percent,
        )

    def to_dict(self) -> Dict[str, Any]:
        doc: Dict[str, Any] = {
            "tile": dict(self.tile),
            "thread_block": list(self.thread_block),
            "threads_per_block": self.threads_per_block,
            "registers_per_thread": self.registers_per_thread,
            "shared_memory_bytes": self.shared_memory_bytes,
            "work_per_thread": self.work_per_thread,
            "precision": self.precision,
            "carveout_percent": self.carveout_percent,
        }
        if self.kernel:
            doc["kernel"] = self.kernel
        return doc

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> KernelConfig:
        """Raises ProfileError on a malformed entry."""
        try:
            block = tuple(int(d) for d in doc["thread_block"])
            if len(block) != 3:
                raise ValueError("thread_block needs 3 dimensions")
            precision = str(doc.get("precision", "double"))
            if precision not in ("single", "double"):
                raise ValueError(f"precision {precision!r} is not single or double")
            carveout = int(doc.get("carveout_percent", 0))
            if not 0 <= carveout <= 100:
                raise ValueError(f"carveout_percent {carveout} is not in [0, 100]")
            return cls(
                tile={str(k): int(v) for k, v in dict(doc["tile"]).items()},
                thread_block=(block[0], block[1], block[2]),
                registers_per_thread=int(doc["registers_per_thread"]),
                shared_memory_bytes=int(doc["shared_memory_bytes"]),
                work_per_thread=int(doc.get("work_per_thread", 1)),
                kernel=str(doc.get("kernel", "")),
                precision=precision,
                carveout_percent=carveout,
            )
        except (KeyError, TypeError, ValueError) as err:
            raise ProfileError(f"bad kernel configuration {dict(doc)!r}: {err}") from None


@dataclass(frozen=True)
class ConfigTable:
    """The configuration chosen at each clock of a board, for one kernel; with a memory axis,
    at each (core, memory) clock pair.

    ``clocks_mhz``, ``index`` and ``energy_j`` are the table at the board's default memory
    clock (the whole table where the board has one memory clock). ``mem_clocks_mhz`` (empty:
    no memory axis), ``default_mem_clock_mhz`` (one of them), ``mem_index`` (per memory
    clock, per core clock: which configuration; its default row is ``index``) and
    ``mem_energy_j`` (the same shape, or empty) add the memory axis.
    """

    kernel: str
    board: str
    precision: str
    clocks_mhz: Tuple[float, ...]
    configs: Tuple[KernelConfig, ...]  # distinct configurations
    index: Tuple[int, ...]  # per clock: which configuration
    energy_j: Tuple[float, ...] = ()  # per clock: the model's energy per run of the choice
    mem_clocks_mhz: Tuple[float, ...] = ()
    default_mem_clock_mhz: Optional[float] = None
    mem_index: Tuple[Tuple[int, ...], ...] = ()
    mem_energy_j: Tuple[Tuple[float, ...], ...] = ()
    _by_clock: Dict[float, KernelConfig] = field(default_factory=dict, compare=False, repr=False)
    _by_pair: Dict[Tuple[float, Optional[float]], KernelConfig] = field(
        default_factory=dict, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        if not self.clocks_mhz or len(self.clocks_mhz) != len(self.index):
            raise ProfileError(f"kernel table {self.kernel}: one configuration per clock")
        if any(not 0 <= i < len(self.configs) for i in self.index):
            raise ProfileError(f"kernel table {self.kernel}: index out of range")
        if list(self.clocks_mhz) != sorted(self.clocks_mhz):
            raise ProfileError(f"kernel table {self.kernel}: clocks must ascend")
        self._check_mem_axis()
        named = tuple(
            c if c.kernel else dataclasses.replace(c, kernel=self.kernel, precision=self.precision)
            for c in self.configs
        )
        if any(c.kernel != self.kernel or c.precision != self.precision for c in named):
            raise ProfileError(
                f"kernel table {self.kernel}/{self.precision}: an entry of another kernel or "
                "precision"
            )
        object.__setattr__(self, "configs", named)  # every entry names its kernel
        self._by_clock.update({c: self.configs[i] for c, i in zip(self.clocks_mhz, self.index)})
        self._by_pair.update({(c, None): config for c, config in self._by_clock.items()})
        for m, row in zip(self.mem_clocks_mhz, self.mem_index):
            self._by_pair.update({(c, m): self.configs[i] for c, i in zip(self.clocks_mhz, row)})

    def _check_mem_axis(self) -> None:
        mems, rows = self.mem_clocks_mhz, self.mem_index
        name = f"kernel table {self.kernel}"
        if not mems:
            if rows or self.mem_energy_j or self.default_mem_clock_mhz is not None:
                raise ProfileError(f"{name}: a memory axis needs its mem_clocks_mhz")
            return
        if list(mems) != sorted(set(mems)) or not all(m > 0 for m in mems):
            raise ProfileError(f"{name}: memory clocks must be positive and ascend")
        if self.default_mem_clock_mhz not in mems:
            raise ProfileError(f"{name}: default_mem_clock_mhz must be one of mem_clocks_mhz")
        if len(rows) != len(mems) or any(len(row) != len(self.clocks_mhz) for row in rows):
            raise ProfileError(
                f"{name}: mem_index needs one configuration per (memory clock, clock) pair"
            )
        if any(not 0 <= i < len(self.configs) for row in rows for i in row):
            raise ProfileError(f"{name}: mem_index out of range")
        if tuple(rows[mems.index(self.default_mem_clock_mhz)]) != tuple(self.index):
            raise ProfileError(f"{name}: mem_index at the default memory clock is not index")
        energies = self.mem_energy_j
        if energies and (
            len(energies) != len(mems) or any(len(e) != len(self.clocks_mhz) for e in energies)
        ):
            raise ProfileError(f"{name}: mem_energy_j needs one energy per pair")

    def at(self, clock_mhz: float, mem_clock_mhz: Optional[float] = None) -> KernelConfig:
        """The configuration for ``clock_mhz`` (and ``mem_clock_mhz``; None: the default
        memory clock; ignored by a table without a memory axis): a dict lookup for a pair of
        the table, else the entry of the highest table clock at or below each (the lowest
        one's below)."""
        hit = self._by_pair.get((clock_mhz, mem_clock_mhz if self.mem_clocks_mhz else None))
        if hit is not None:
            return hit
        pos = max(0, bisect.bisect_right(self.clocks_mhz, clock_mhz) - 1)
        if mem_clock_mhz is None or not self.mem_clocks_mhz:
            return self.configs[self.index[pos]]
        row = max(0, bisect.bisect_right(self.mem_clocks_mhz, mem_clock_mhz) - 1)
        return self.configs[self.mem_index[row][pos]]

    @property
    def has_mem_axis(self) -> bool:
        return bool(self.mem_clocks_mhz)

    def ppw_clock_mhz(self) -> Optional[float]:
        """The clock of least energy per run at each clock's own configuration (the kernel's
        PPW clock at its tuned configuration); None when the table has no energies."""
        if len(self.energy_j) != len(self.clocks_mhz):
            return None
        best = min(range(len(self.energy_j)), key=lambda k: (self.energy_j[k], k))
        return self.clocks_mhz[best]

    def ppw_pair_mhz(self) -> Optional[Tuple[float, float]]:
        """(core, memory) clock of least energy per run over the memory axis; None without
        the axis or its energies."""
        if not self.mem_clocks_mhz or not self.mem_energy_j:
            return None
        pairs = [
            (e, -k, c, m)
            for m, row in zip(self.mem_clocks_mhz, self.mem_energy_j)
            for k, (c, e) in enumerate(zip(self.clocks_mhz, row))
        ]
        best = min(pairs)
        return best[2], best[3]

    def bands(
        self, mem_clock_mhz: Optional[float] = None
    ) -> List[Tuple[float, float, KernelConfig]]:
        """(lowest clock, highest clock, configuration) of each run of equal choices, at
        ``mem_clock_mhz`` (a memory clock of the table; None: the default one)."""
        index = self.index
        if mem_clock_mhz is not None and self.mem_clocks_mhz:
            if mem_clock_mhz not in self.mem_clocks_mhz:
                raise InvalidRequestError(
                    f"{mem_clock_mhz:g} MHz is not a memory clock of the table "
                    f"({', '.join(f'{m:g}' for m in self.mem_clocks_mhz)})"
                )
            index = self.mem_index[self.mem_clocks_mhz.index(mem_clock_mhz)]
        out: List[Tuple[float, float, KernelConfig]] = []
        start = 0
        for k in range(1, len(index) + 1):
            if k == len(index) or index[k] != index[start]:
                out.append(
                    (
                        self.clocks_mhz[start],
                        self.clocks_mhz[k - 1],
                        self.configs[index[start]],
                    )
                )
                start = k
        return out

    def to_dict(self) -> Dict[str, Any]:
        doc: Dict[str, Any] = {
            "kernel": self.kernel,
            "board": self.board,
            "precision": self.precision,
            "clocks_mhz": list(self.clocks_mhz),
            "configs": [c.to_dict() for c in self.configs],
            "index": list(self.index),
            "energy_j": list(self.energy_j),
        }
        if self.mem_clocks_mhz:  # absent without the axis: such a table reads as before
            doc["mem_clocks_mhz"] = list(self.mem_clocks_mhz)
            doc["default_mem_clock_mhz"] = self.default_mem_clock_mhz
            doc["mem_index"] = [list(row) for row in self.mem_index]
            doc["mem_energy_j"] = [list(row) for row in self.mem_energy_j]
        return doc

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> ConfigTable:
        """Raises ProfileError on a malformed table (a table without the memory axis, as
        every table written before it, reads as one without it)."""
        try:
            default_mem = doc.get("default_mem_clock_mhz")
            return cls(
                kernel=str(doc["kernel"]),
                board=str(doc["board"]),
                precision=str(doc.get("precision", "double")),
                clocks_mhz=tuple(float(c) for c in doc["clocks_mhz"]),
                configs=tuple(
                    KernelConfig.from_dict(
                        {"kernel": doc["kernel"], "precision": doc.get("precision", "double"), **c}
                    )
                    for c in doc["configs"]
                ),
                index=tuple(int(i) for i in doc["index"]),
                energy_j=tuple(float(e) for e in doc.get("energy_j", ())),
                mem_clocks_mhz=tuple(float(m) for m in doc.get("mem_clocks_mhz", ())),
                default_mem_clock_mhz=None if default_mem is None else float(default_mem),
                mem_index=tuple(tuple(int(i) for i in row) for row in doc.get("mem_index", ())),
                mem_energy_j=tuple(
                    tuple(float(e) for e in row) for row in doc.get("mem_energy_j", ())
                ),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise ProfileError(f"bad kernel configuration table: {err}") from None


@dataclass(frozen=True)
class Candidate:
    """A configuration and its block-size model (the work a run does is the same for all)."""

    config: KernelConfig
    model: KernelModel


def _tile_options(kernel: str, board: str, precision: str) -> List[Dict[str, int]]:
    from governor.kernels.select import PPCG_DEFAULT_TILE, select_kernel_tiles
    from governor.tuning.eatss import find_gpu, select_tiles

    template = find_template(kernel)
    sel = select_kernel_tiles(kernel, board, precision)
    options = [dict(sel.tiles)]
    if sel.selector == "eatss" and sel.warp_fraction is not None:
        result = select_tiles(
            template.eatss_kernel,
            find_gpu(board),
            sel.shared_fraction,
            sel.warp_fraction,
            precision,
            top=3,
        )
        options += [{k: int(c.tiles[k]) for k in template.loops} for c in result.alternatives]
    options.append({loop: PPCG_DEFAULT_TILE for loop in template.loops})
    unique: List[Dict[str, int]] = []
    for tile in options:
        if tile not in unique:
            unique.append(tile)
    return unique


@functools.lru_cache(maxsize=512)
def _compiled(
    kernel: str,
    board: str,
    tile: Tuple[Tuple[str, int], ...],
    threads: int,
    precision: str,
    shared_fraction: float,
) -> Optional[KernelConfig]:
    from governor.kernels.build import build_kernel

    try:
        built = build_kernel(kernel, board, dict(tile), threads, precision, shared_fraction)
    except LaunchError:
        return None
    return KernelConfig.from_plan(
        built.plan, built.report.registers_per_thread, built.report.shared_memory_bytes
    )


def candidate_plans(kernel: str, board: str, precision: str = "double") -> List[LaunchPlan]:
    """Every candidate configuration's launch plan that passes the board's limits before
    compiling (tile options x thread targets, at the selector's shared-memory fraction):
    what :func:`candidates` compiles; a superset of what a table can hand out."""
    from governor.kernels.mapping import plan_launch
    from governor.kernels.select import board_arch, select_kernel_tiles

    limits = board_arch(board).limits
    fraction = select_kernel_tiles(kernel, board, precision).shared_fraction
    plans: List[LaunchPlan] = []
    for tile in _tile_options(kernel, board, precision):
        for threads in THREAD_TARGETS:
            try:
                plan = plan_launch(kernel, tile, limits, threads, fraction, precision)
            except LaunchError:
                continue
            if plan not in plans:
                plans.append(plan)
    return plans


def candidates(kernel: str, board: str, precision: str = "double") -> List[Candidate]:
    """Every launchable candidate configuration with its model (compiles with NVRTC). Each is
    compiled at the selector's shared-memory fraction, the carveout its launch asks for.

    Raises:
        InvalidRequestError: unknown kernel.
        DeviceNotFoundError: unknown board.
        UnsupportedError: NVRTC is not installed.
    """
    from governor.kernels.select import select_kernel_tiles
    from governor.tuning.blocks.simkernels import KernelModel

    description = find_template(kernel)
    fraction = select_kernel_tiles(kernel, board, precision).shared_fraction
    configs: List[KernelConfig] = []
    for tile in _tile_options(kernel, board, precision):
        for threads in THREAD_TARGETS:
            key = tuple(sorted(tile.items()))
            config = _compiled(kernel, board, key, threads, precision, fraction)
            if config is not None and config not in configs:
                configs.append(config)
    if not configs:
        raise InvalidRequestError(f"no configuration of {kernel} launches on {board}")
    reference = description.traffic(configs[0].tile)
    share = description.memory_share
    out = []
    for config in configs:
        mem_s = WORK_S * share * description.traffic(config.tile) / reference
        compute_s = WORK_S * (1.0 - share)
        model = KernelModel(
            name=kernel,
            threads=max(1, description.problem_points // config.work_per_thread),
            work_s=compute_s + mem_s,
            mem_fraction=mem_s / (compute_s + mem_s),
            registers_per_thread=config.registers_per_thread,
            static_shared_bytes=config.shared_memory_bytes,
        )
        out.append(Candidate(config=config, model=model))
    return out


def run_cost(
    board_spec: BoardSpec,
    candidate: Candidate,
    clock_mhz: float,
    mem_clock_mhz: Optional[float] = None,
) -> Tuple[float, float]:
    """(time_s, energy_j) of one run of ``candidate`` at ``clock_mhz`` and ``mem_clock_mhz``
    (None: the board's default memory clock) on the whole board."""
    from governor.tuning.blocks.simkernels import evaluate

    point = evaluate(
        board_spec, [candidate.model], [candidate.config.thread_block], clock_mhz, mem_clock_mhz
    )
    return point.time_s, point.energy_j


def best_table(
    kernel: str,
    board: str,
    precision: str = "double",
    clocks_mhz: Optional[Sequence[float]] = None,
    mem_clocks_mhz: Optional[Sequence[float]] = None,
) -> ConfigTable:
    """The least-energy configuration at each clock (the board's table by default), and at
    each (clock, memory clock) pair where the board has several memory clocks
    (``mem_clocks_mhz``: the board's by default; its default memory clock is always one).

    Raises:
        InvalidRequestError, DeviceNotFoundError, UnsupportedError: as :func:`candidates`.
    """
    from governor.devices.sim.catalog import get_board

    spec = get_board(board)
    clocks = tuple(sorted(float(c) for c in (clocks_mhz or spec.clocks_mhz)))
    default_mem = spec.default_mem_clock_mhz
    mems: Tuple[float, ...] = ()
    if default_mem is not None:
        wanted = {float(m) for m in (mem_clocks_mhz or spec.mem_clocks_mhz)} | {default_mem}
        if any(not m > 0 for m in wanted):
            raise InvalidRequestError("memory clocks must be positive")
        mems = tuple(sorted(wanted)) if len(wanted) > 1 else ()
    cands = candidates(kernel, board, precision)
    configs: List[KernelConfig] = []

    def column(mem_clock: Optional[float]) -> Tuple[List[int], List[float]]:
        index: List[int] = []
        energies: List[float] = []
        for clock in clocks:
            costs = [run_cost(spec, c, clock, mem_clock) for c in cands]
            best = min(range(len(cands)), key=lambda k: (costs[k][1], k))
            config = cands[best].config
            if config not in configs:
                configs.append(config)
            index.append(configs.index(config))
            energies.append(costs[best][1])
        return index, energies

    index, energies = column(None)  # the default memory clock: the table without the axis
    rows = [(index, energies) if m == default_mem else column(m) for m in mems]
    return ConfigTable(
        kernel=kernel,
        board=board,
        precision=precision,
        clocks_mhz=clocks,
        configs=tuple(configs),
        index=tuple(index),
        energy_j=tuple(energies),
        mem_clocks_mhz=mems,
        default_mem_clock_mhz=default_mem if mems else None,
        mem_index=tuple(tuple(r[0]) for r in rows),
        mem_energy_j=tuple(tuple(r[1]) for r in rows),
    )


def table_key(kernel: str, precision: str = "double") -> str:
    return f"{kernel}@{precision}"


def save_table(table: ConfigTable, board: Optional[str] = None) -> Path:
    """Store ``table`` in the board's profile (``tuning.kernel_configs``); returns the path."""
    from governor.profiles.store import put_tuning

    return put_tuning(
        board or table.board, SECTION, table_key(table.kernel, table.precision), table.to_dict()
    )


def load_table(board: str, kernel: str, precision: str = "double") -> Optional[ConfigTable]:
    """The stored table of ``kernel`` on ``board``, or None.

    Raises:
        ProfileError: the profile or the table is malformed.
    """
    from governor.profiles.store import get_tuning

    doc = get_tuning(board, SECTION, table_key(kernel, precision))
    return None if doc is None else ConfigTable.from_dict(doc)
