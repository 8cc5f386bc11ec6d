"""Draw a calibration: measured points, fitted P(f) and E(f), the ridge and the optimum."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from governor.errors import InvalidRequestError, UnsupportedError

__all__ = ["plot_calibration"]


def plot_calibration(result: Any, path: Path, title: str = "") -> Path:
    """Write a PNG of ``result`` to ``path``.

    Raises:
        UnsupportedError: matplotlib is not installed (the ``plot`` extra).
        InvalidRequestError: the file cannot be written.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise UnsupportedError("--plot needs matplotlib: pip install 'gpu-governor[plot]'") from err
    import numpy as np

    clocks = np.array(result.supported_clocks_mhz, dtype=float)
    grid = np.linspace(clocks[0], clocks[-1], 400)
    probes = sorted(result.probes, key=lambda p: p.clock_mhz)
    f = np.array([p.clock_mhz for p in probes])
    fig, (ax_p, ax_e) = plt.subplots(2, 1, figsize=(7, 7), sharex=True)
    ax_p.plot(grid, result.power_model.power_w(grid), label="fitted P(f)")
    ax_p.scatter(f, [p.power_w for p in probes], color="k", zorder=3, label="measured")
    capped = [p for p in probes if p.throttled]
    if capped:
        ax_p.scatter(
            [p.clock_mhz for p in capped],
            [p.power_w for p in capped],
            color="r",
            zorder=4,
            label="power-capped",
        )
    ax_p.set_ylabel("power under load (W)")
    ax_e.plot(grid, result.energy_per_unit_j(grid), label="model E(f) = P(f)·t(f)")
    ax_e.scatter(f, [p.energy_per_unit_j for p in probes], color="k", zorder=3, label="measured")
    ax_e.set_ylabel("energy per unit of work (J)")
    ax_e.set_xlabel("GPU clock (MHz)")
    for ax in (ax_p, ax_e):
        ax.axvline(
            result.ridge_clock_mhz,
            color="tab:orange",
            ls="--",
            label=f"ridge {result.ridge_clock_mhz:.0f} MHz",
        )
        ax.axvline(
            result.ppw_optimal_clock_mhz,
            color="tab:green",
            ls="-",
            label=f"PPW optimum {result.ppw_optimal_clock_mhz:g} MHz",
        )
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    ax_p.set_title(title or result.device_uri)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as err:
        raise InvalidRequestError(
            f"cannot write the plot to {path}: {err.strerror or err}"
        ) from err
    finally:
        plt.close(fig)
    return Path(path)
