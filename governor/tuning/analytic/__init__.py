"""Analytic tile models: HHC stencils (thesis) and tiled DOACROSS loops (Di & Xue), with energy.

Both predict a tiled kernel's time from a few calibrated constants, so tiles are chosen by
searching the model (vectorised numpy over whole candidate grids) instead of measuring every
candidate; joined with a board's :class:`PowerModel` they rank tiles and clocks by energy.

    >>> from governor.tuning.analytic import catalog, select_hhc
    >>> sel = select_hhc(catalog.stencil("gradient2d"), catalog.hhc_gpu("gtx980"),
    ...                  (8192, 8192), 8192)
    >>> round(sel.ideal_time_s, 2)
    16.35

Imports numpy (and scipy when fitting); ``import governor`` does not load this package.
"""

from __future__ import annotations

from governor.tuning.analytic import catalog
from governor.tuning.analytic.calibrate import (
    SyntheticDoacrossGpu,
    SyntheticEnergyGpu,
    SyntheticHhcGpu,
    calibrate_doacross,
    calibrate_hhc,
    calibrate_on_device,
    calibrate_stencil_energy,
)
from governor.tuning.analytic.device import calibrate_device, store_constants
from governor.tuning.analytic.doacross import (
    DoacrossConstants,
    DoacrossResult,
    ThreadOrg,
    default_constants,
    doacross_search,
    total_time_s,
)
from governor.tuning.analytic.energy import (
    K20C_ENERGY_L1,
    K20C_ENERGY_MICRO,
    PowerModel,
    StencilEnergyConstants,
    fit_energy_l1,
    hhc_energy_features,
    power_model_for_board,
)
from governor.tuning.analytic.hhc import (
    HhcChoice,
    HhcSelection,
    hhc_candidates,
    hhc_time_s,
    ideal_time_s,
    select_hhc,
)

__all__ = [
    "DoacrossConstants",
    "DoacrossResult",
    "HhcChoice",
    "HhcSelection",
    "K20C_ENERGY_L1",
    "K20C_ENERGY_MICRO",
    "PowerModel",
    "StencilEnergyConstants",
    "SyntheticDoacrossGpu",
    "SyntheticEnergyGpu",
    "SyntheticHhcGpu",
    "ThreadOrg",
    "calibrate_device",
    "calibrate_doacross",
    "calibrate_hhc",
    "calibrate_on_device",
    "calibrate_stencil_energy",
    "catalog",
    "default_constants",
    "doacross_search",
    "fit_energy_l1",
    "hhc_candidates",
    "hhc_energy_features",
    "hhc_time_s",
    "ideal_time_s",
    "power_model_for_board",
    "select_hhc",
    "store_constants",
    "total_time_s",
]
