"""Thread-block size and clock selection (Lopes et al., multi-kernel energy-aware tuning).

Rank block shapes by theoretical occupancy (:mod:`.candidates`), then walk clock and blocks
greedily over a benchmark function (:mod:`.procedures`) that may be a user's callable, a
command run on a device, a recorded Kernel Tuner table or a simulated board (:mod:`.bench`).
Choices are cached in the board's profile (:mod:`.cache`).
"""

from __future__ import annotations

from governor.tuning.blocks.candidates import (
    Candidate,
    KernelResources,
    default_blocks,
    rank_candidates,
    shapes_2d,
)
from governor.tuning.blocks.procedures import (
    Measurement,
    TuneResult,
    exhaustive,
    tune_energy,
    tune_energy_multi,
    tune_time,
    tune_time_multi,
)

__all__ = [
    "Candidate",
    "KernelResources",
    "Measurement",
    "TuneResult",
    "default_blocks",
    "exhaustive",
    "rank_candidates",
    "shapes_2d",
    "tune_energy",
    "tune_energy_multi",
    "tune_time",
    "tune_time_multi",
]
