"""Built-in GPUs, stencils and DOACROSS nests for the analytic tile models.

HHC figures are the thesis's calibrated constants (Tables A.2-A.4, "Analytical cost metrics:
days of future past"); the App. B energy constants are its Tesla K20c fits. The DOACROSS paper
(Di & Xue) publishes no constants, so the ``c1060`` entry carries *illustrative* values of the
right order for a Tesla C1060; calibrate them (``governor.tuning.analytic.calibrate``) before
trusting absolute times.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Dict, Mapping, Optional, Tuple, TypeVar

from governor.errors import DeviceNotFoundError, InvalidRequestError

__all__ = [
    "DOACROSS_GPUS",
    "DoacrossGpu",
    "board_doacross_gpu",
    "HHC_GPUS",
    "HhcGpu",
    "NESTS",
    "Nest",
    "STENCILS",
    "Stencil",
    "doacross_gpu",
    "hhc_gpu",
    "nest",
    "stencil",
]

KIB = 1024


@dataclass(frozen=True)
class Stencil:
    """One stencil: its spatial dimensions and the work of one loop-body iteration.

    ``fadd``/``fmul`` count floating-point operations per point and ``shared_reads`` the
    shared-memory words one point reads; they feed the App. B energy model.
    """

    name: str
    dims: int
    fadd: int
    fmul: int
    shared_reads: int


@dataclass(frozen=True)
class HhcGpu:
    """A GPU as the HHC model sees it, with the thesis's calibrated constants.

    ``l_s_per_gb`` is the thesis's L in s/GB; the model turns it into seconds per word with
    ``word_bytes``. ``c_iter_s`` maps stencil name to C_iter (one loop-body iteration per vector
    unit, data in shared memory). ``reference_clock_mhz`` is the core clock the constants
    describe (the board's boost clock, an assumption: the thesis does not state it); the energy
    objective scales C_iter and the in-block barrier by reference/clock.
    """

    name: str
    n_sm: int
    n_v: int
    shared_per_sm_bytes: int
    shared_per_block_bytes: int
    regs_per_sm: int
    max_blocks_per_sm: int
    l_s_per_gb: float
    tau_sync_s: float
    t_sync_s: float
    c_iter_s: Dict[str, float] = field(default_factory=dict)
    reference_clock_mhz: float = 1000.0
    word_bytes: int = 4

    @property
    def l_s_per_word(self) -> float:
        return self.l_s_per_gb * self.word_bytes * 1e-9

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> HhcGpu:
        """Build from :meth:`to_dict` output (extra keys are ignored).

        Raises:
            InvalidRequestError: a field is missing or malformed.
        """
        return _from_dict(cls, doc, "HHC GPU")


@dataclass(frozen=True)
class Nest:
    """A DOACROSS loop nest: ``depth`` loops (time outermost), reuse threshold of the search."""

    name: str
    depth: int
    reuse_threshold: float
    # Skewed SOR: every spatial loop is skewed by the time loop (factor 1).


@dataclass(frozen=True)
class DoacrossGpu:
    """Occupancy limits of a GPU for the DOACROSS model (P SMs, B blocks per SM)."""

    name: str
    n_sm: int
    shared_per_sm_bytes: int
    max_blocks_per_sm: int
    max_threads_per_sm: int
    max_threads_per_block: int
    regs_per_sm: int
    regs_per_thread: int = 16
    word_bytes: int = 4
    warp_size: int = 32

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> DoacrossGpu:
        """Build from :meth:`to_dict` output. Raises InvalidRequestError when malformed."""
        return _from_dict(cls, doc, "DOACROSS GPU")


def _from_dict(cls: Any, doc: Mapping[str, Any], what: str) -> Any:
    try:
        kwargs: Dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in doc:
                continue
            value = doc[f.name]
            if f.name == "name":
                kwargs[f.name] = str(value)
            elif f.name == "c_iter_s":
                kwargs[f.name] = {str(k): float(v) for k, v in value.items()}
            elif isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{f.name} must be a number")
            else:
                kwargs[f.name] = type(f.default)(value) if isinstance(f.default, float) else value
        return cls(**kwargs)
    except (TypeError, ValueError, AttributeError) as err:
        raise InvalidRequestError(f"bad {what} constants: {err}") from None


STENCILS: Dict[str, Stencil] = {
    s.name: s
    for s in (
        Stencil("jacobi2d", 2, fadd=4, fmul=1, shared_reads=5),
        Stencil("heat2d", 2, fadd=8, fmul=2, shared_reads=9),
        Stencil("laplacian2d", 2, fadd=4, fmul=1, shared_reads=5),
        Stencil("gradient2d", 2, fadd=6, fmul=4, shared_reads=5),
        Stencil("heat3d", 3, fadd=12, fmul=2, shared_reads=7),
        Stencil("laplacian3d", 3, fadd=6, fmul=1, shared_reads=7),
    )
}

_GTX980_C = (3.39e-8, 3.68e-8, 3.11e-8, 6.09e-8, 1.55e-7, 1.36e-7)
_TITANX_C = (3.83e-8, 4.23e-8, 3.81e-8, 7.60e-8, 1.64e-7, 1.44e-7)
_NAMES = ("jacobi2d", "heat2d", "laplacian2d", "gradient2d", "heat3d", "laplacian3d")

HHC_GPUS: Dict[str, HhcGpu] = {
    "gtx980": HhcGpu(
        name="gtx980",
        n_sm=16,
        n_v=128,
        shared_per_sm_bytes=96 * KIB,
        shared_per_block_bytes=48 * KIB,
        regs_per_sm=65536,
        max_blocks_per_sm=32,
        l_s_per_gb=7.36e-3,
        tau_sync_s=7.96e-10,
        t_sync_s=9.24e-7,
        c_iter_s=dict(zip(_NAMES, _GTX980_C)),
        reference_clock_mhz=1216.0,
    ),
    "titanx": HhcGpu(
        name="titanx",
        n_sm=24,
        n_v=128,
        shared_per_sm_bytes=96 * KIB,
        shared_per_block_bytes=48 * KIB,
        regs_per_sm=65536,
        max_blocks_per_sm=32,
        l_s_per_gb=5.42e-3,
        tau_sync_s=6.74e-10,
        t_sync_s=9.00e-7,
        c_iter_s=dict(zip(_NAMES, _TITANX_C)),
        reference_clock_mhz=1075.0,
    ),
}

NESTS: Dict[str, Nest] = {
    "sor1d": Nest("sor1d", depth=2, reuse_threshold=300.0),
    "sor2d": Nest("sor2d", depth=3, reuse_threshold=6.0),
    "sor3d": Nest("sor3d", depth=4, reuse_threshold=1.0),
}

DOACROSS_GPUS: Dict[str, DoacrossGpu] = {
    "c1060": DoacrossGpu(
        name="c1060",
        n_sm=30,
        shared_per_sm_bytes=16 * KIB,
        max_blocks_per_sm=8,
        max_threads_per_sm=1024,
        max_threads_per_block=512,
        regs_per_sm=16384,
    ),
    "gtx980": DoacrossGpu(
        name="gtx980",
        n_sm=16,
        shared_per_sm_bytes=96 * KIB,
        max_blocks_per_sm=32,
        max_threads_per_sm=2048,
        max_threads_per_block=1024,
        regs_per_sm=65536,
    ),
    "titanx": DoacrossGpu(
        name="titanx",
        n_sm=24,
        shared_per_sm_bytes=96 * KIB,
        max_blocks_per_sm=32,
        max_threads_per_sm=2048,
        max_threads_per_block=1024,
        regs_per_sm=65536,
    ),
}


_T = TypeVar("_T")


def _lookup(table: Mapping[str, _T], name: str, what: str) -> _T:
    from governor.names import did_you_mean

    key = str(name).strip().lower()
    if key.startswith("sim:"):
        key = key[len("sim:") :]
    key = key.replace("-", "").replace("_", "")
    if key not in table:
        raise DeviceNotFoundError(
            f"unknown {what} {name!r}{did_you_mean(key, table) or ';'} known: {', '.join(sorted(table))}"
        )
    return table[key]


def stencil(name: str) -> Stencil:
    """The built-in stencil ``name``. Raises DeviceNotFoundError for an unknown one."""
    return _lookup(STENCILS, name, "stencil")


def _catalog_board(name: str) -> Optional[str]:
    """The simulated catalog's board that ``name`` (``nano``, ``sim:nano?seed=1``) names, or
    None."""
    from governor.devices.sim.catalog import board_names
    from governor.errors import GovernorError

    key = str(name).strip().lower()
    if key.startswith("sim:"):
        key = key[len("sim:") :]
    key = key.split("?", 1)[0]
    try:
        return key if key in board_names() else None
    except GovernorError:  # no catalog to read (a profiles folder of one's own)
        return None


def _builtin(table: Mapping[str, Any], name: str) -> bool:
    key = str(name).strip().lower()
    return key.replace("sim:", "", 1).replace("-", "").replace("_", "") in table


# the catalog boards whose GPU the thesis measured, by catalog name
_HHC_CATALOG = {"titan-x": "titanx"}


def hhc_gpu(name: str) -> HhcGpu:
    """The built-in HHC GPU ``name`` (a thesis GPU, or the catalog board ``titan-x``).

    Raises:
        DeviceNotFoundError: an unknown name, or a catalog board whose constants were never
            measured (the message says how to measure them).
    """
    board = None if _builtin(HHC_GPUS, name) else _catalog_board(name)
    if board in _HHC_CATALOG:
        return replace(HHC_GPUS[_HHC_CATALOG[board]], name=board)
    if board is not None:
        raise DeviceNotFoundError(
            f"no HHC constants for {board}: the HHC model needs L, tau_sync, T_sync and "
            "C_iter measured on the GPU, and the built-in ones are the thesis's gtx980 and "
            f"titanx (catalog board titan-x) only; calibrate them with `governor "
            f"tiles-calibrate --model hhc --device sim:{board} --save`, then give --board "
            f"{board} (the micro-benchmarks run on simulated boards only so far)"
        )
    return _lookup(HHC_GPUS, name, "GPU")


def nest(name: str) -> Nest:
    """The built-in DOACROSS nest ``name``. Raises DeviceNotFoundError for an unknown one."""
    return _lookup(NESTS, name, "nest")


def doacross_gpu(name: str) -> DoacrossGpu:
    """The DOACROSS GPU ``name``: a built-in one, or any catalog board, whose occupancy limits
    (SMs, shared memory, blocks, threads and registers per SM) follow from its compute
    capability and SM count. Raises DeviceNotFoundError for an unknown one."""
    board = None if _builtin(DOACROSS_GPUS, name) else _catalog_board(name)
    if board is not None:
        from governor.devices.sim.catalog import get_board

        return board_doacross_gpu(get_board(board))
    return _lookup(DOACROSS_GPUS, name, "GPU")


def board_doacross_gpu(board: Any) -> DoacrossGpu:
    """A catalog board's (:class:`~governor.devices.sim.physics.BoardSpec`) occupancy limits
    as the DOACROSS model sees them, from its compute capability and SM count.

    Raises:
        UnsupportedError: the catalog gives no SM count or compute capability.
    """
    from governor.errors import UnsupportedError
    from governor.tuning.occupancy import arch_limits

    facts = board.facts
    if "cc" not in facts or "sms" not in facts:
        raise UnsupportedError(f"board {board.name} lacks the SM count or compute capability")
    arch = arch_limits(str(facts["cc"]))
    return DoacrossGpu(
        name=board.name,
        n_sm=int(facts["sms"]),
        shared_per_sm_bytes=int(arch.shared_per_sm_bytes),
        max_blocks_per_sm=int(arch.max_blocks_per_sm),
        max_threads_per_sm=int(arch.max_threads_per_sm),
        max_threads_per_block=int(arch.max_threads_per_block),
        regs_per_sm=int(arch.regs_per_sm),
    )


def known(table: Dict[str, object]) -> Tuple[str, ...]:
    return tuple(sorted(table))
