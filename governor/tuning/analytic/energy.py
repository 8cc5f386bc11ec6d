"""Energy for the analytic tile models: a board's power model, and the thesis's App. B model.

Two routes to energy:

- :class:`PowerModel`, the ridge-point model of a calibrated board
  (P(f) = min(p_max_w, p_idle_w + alpha_w_per_mhz·f·V(f)²), V = 1 below the ridge,
  1 + beta_per_mhz·(f − ridge) above). Energy of a tile choice at a clock is P(f) × the time
  model at that clock. Read one from a profile with :func:`power_model_for_board`, which takes
  the profile's real keys (``alpha_w_per_mhz``, ``beta_per_mhz``, clocks under
  ``fingerprint.supported_clocks_mhz``).
- :class:`StencilEnergyConstants`, the thesis's component model
  E = P_stat·T_alg + N_tiles·(e_gs·M_io + e_sr·SR + V_tile·(fadd·e_fadd + fmul·e_fmul)),
  fitted by :func:`fit_energy_l1`, an L1 linear program with every constant ≥ 0.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from governor.errors import CalibrationError, InvalidRequestError, ProfileError

__all__ = [
    "ENERGY_TERMS",
    "K20C_ENERGY_L1",
    "K20C_ENERGY_MICRO",
    "PowerModel",
    "StencilEnergyConstants",
    "fit_energy_l1",
    "hhc_energy_features",
    "power_model_for_board",
]

ENERGY_TERMS = ("p_stat_w", "e_gs_j", "e_sr_j", "e_fadd_j", "e_fmul_j")


@dataclass(frozen=True)
class PowerModel:
    """A board's power under load as a function of core clock, and its supported clocks.

    Field names are those of a profile's ``power_model`` (``governor calibrate``, see
    :mod:`governor.models.power`); ``p_max_w`` may be infinite (no cap observed).
    """

    p_idle_w: float
    alpha_w_per_mhz: float
    ridge_clock_mhz: float
    beta_per_mhz: float
    p_max_w: float = math.inf
    supported_clocks_mhz: Tuple[float, ...] = ()

    def __post_init__(self) -> None:
        for name in ("p_idle_w", "alpha_w_per_mhz", "ridge_clock_mhz", "beta_per_mhz", "p_max_w"):
            value = getattr(self, name)
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not ok or math.isnan(value) or value < 0:
                raise InvalidRequestError(f"power model {name} must be a number >= 0")
            if name != "p_max_w" and math.isinf(value):
                raise InvalidRequestError(f"power model {name} must be finite")
        clocks = tuple(float(c) for c in self.supported_clocks_mhz)
        if any(not (c > 0 and math.isfinite(c)) for c in clocks):
            raise InvalidRequestError("power model clocks must be positive MHz")
        object.__setattr__(self, "supported_clocks_mhz", tuple(sorted(set(clocks))))

    # the names this class had before it followed the profile's keys
    @property
    def alpha(self) -> float:
        return self.alpha_w_per_mhz

    @property
    def beta(self) -> float:
        return self.beta_per_mhz

    def power_w(self, clock_mhz: Any) -> np.ndarray:
        """Power in W at ``clock_mhz`` (scalar or array)."""
        from governor.models.formulas import power_w

        f = np.asarray(clock_mhz, dtype=float)
        return power_w(
            f,
            self.p_idle_w,
            self.alpha_w_per_mhz,
            self.ridge_clock_mhz,
            self.beta_per_mhz,
            self.p_max_w,
        )

    __call__ = power_w

    def to_dict(self) -> Dict[str, Any]:
        return {
            "p_idle_w": self.p_idle_w,
            "alpha_w_per_mhz": self.alpha_w_per_mhz,
            "ridge_clock_mhz": self.ridge_clock_mhz,
            "beta_per_mhz": self.beta_per_mhz,
            "p_max_w": None if math.isinf(self.p_max_w) else self.p_max_w,
            "supported_clocks_mhz": list(self.supported_clocks_mhz),
        }

    @classmethod
    def from_dict(
        cls, doc: Mapping[str, Any], clocks_mhz: Optional[Sequence[float]] = None
    ) -> PowerModel:
        """Build from a profile's ``power_model`` object: keys ``p_idle_w``,
        ``alpha_w_per_mhz``, ``ridge_clock_mhz``, ``beta_per_mhz``, ``p_max_w`` (null: no cap).
        ``clocks_mhz`` defaults to the object's own ``supported_clocks_mhz``.

        Raises:
            InvalidRequestError: a key is missing or not a number (one line).
        """
        if not isinstance(doc, Mapping):
            raise InvalidRequestError("power model must be a JSON object")
        missing = [k for k in _PM_KEYS if k not in doc]
        if missing:
            raise InvalidRequestError(f"power model lacks {', '.join(missing)}")
        try:
            p_max = doc.get("p_max_w")
            return cls(
                p_idle_w=float(doc["p_idle_w"]),
                alpha_w_per_mhz=float(doc["alpha_w_per_mhz"]),
                ridge_clock_mhz=float(doc["ridge_clock_mhz"]),
                beta_per_mhz=float(doc["beta_per_mhz"]),
                p_max_w=math.inf if p_max is None else float(p_max),
                supported_clocks_mhz=tuple(clocks_mhz or doc.get("supported_clocks_mhz") or ()),
            )
        except (TypeError, ValueError) as err:
            raise InvalidRequestError(f"power model has a bad field: {err}") from None


_PM_KEYS = ("p_idle_w", "alpha_w_per_mhz", "ridge_clock_mhz", "beta_per_mhz")


def _profile_clocks(doc: Mapping[str, Any]) -> Any:
    fp = doc.get("fingerprint")
    if isinstance(fp, Mapping) and fp.get("supported_clocks_mhz"):
        return fp["supported_clocks_mhz"]
    model = doc.get("power_model")
    if isinstance(model, Mapping) and model.get("supported_clocks_mhz"):
        return model["supported_clocks_mhz"]
    return None


def power_model_for_board(board: str) -> PowerModel:
    """The power model in ``board``'s calibration profile (``governor calibrate`` writes it):
    top-level ``power_model`` and the clocks in ``fingerprint.supported_clocks_mhz``.

    Raises:
        ProfileError: no profile, or one without a usable power model or clocks (the message
            says to run ``governor calibrate`` first).
    """
    from governor.profiles.store import profile_paths, read_profile_file

    for path in profile_paths(board):
        if not path.exists():
            continue
        doc = read_profile_file(path)
        model = doc.get("power_model")
        if model is None and "tuning" in doc:
            continue  # a tuning-only cache, not a calibration
        clocks = _profile_clocks(doc)
        if not isinstance(model, Mapping) or not clocks:
            raise ProfileError(
                f"profile of {board!r} has no power_model / fingerprint.supported_clocks_mhz; "
                f"run `governor calibrate` on it first",
                path,
            )
        if not isinstance(clocks, (list, tuple)):
            raise ProfileError(f"profile of {board!r}: supported_clocks_mhz is not a list", path)
        try:
            return PowerModel.from_dict(model, [float(c) for c in clocks])
        except (InvalidRequestError, TypeError, ValueError) as err:
            raise ProfileError(f"bad power_model in profile of {board!r}: {err}", path) from None
    raise ProfileError(
        f"no calibration profile for board {board!r}; run `governor calibrate` on it first"
    )


@dataclass(frozen=True)
class StencilEnergyConstants:
    """The thesis's App. B energy constants: static power (W) and energies per event (J)."""

    p_stat_w: float
    e_gs_j: float
    e_sr_j: float
    e_fadd_j: float
    e_fmul_j: float

    def as_array(self) -> np.ndarray:
        return np.array([getattr(self, n) for n in ENERGY_TERMS], dtype=float)

    def to_dict(self) -> Dict[str, float]:
        return asdict(self)

    def energy_j(self, features: Any) -> np.ndarray:
        """Energy in J of runs described by ``features`` (rows of :data:`ENERGY_TERMS` counts)."""
        return np.asarray(features, dtype=float) @ self.as_array()


# Thesis App. B, Tesla K20c: micro-benchmark values and L1-regression values.
K20C_ENERGY_MICRO = StencilEnergyConstants(48.0, 2.2e-9, 2.23e-10, 5.3e-11, 3.7e-11)
K20C_ENERGY_L1 = StencilEnergyConstants(53.0, 3.17e-9, 1.84e-10, 5.02e-11, 3.51e-11)


def fit_energy_l1(features: Any, energy_j: Any) -> StencilEnergyConstants:
    """Fit the App. B constants by minimising Σ|features·x − energy_j| with x ≥ 0 (an LP).

    ``features`` has one row per run and the columns of :data:`ENERGY_TERMS`: run time (s),
    global words moved, shared-memory words, fadd count, fmul count. Columns are scaled to unit
    size before solving, so constants 10 orders of magnitude apart are found equally well.

    Raises:
        InvalidRequestError: shapes do not match or fewer runs than constants.
        CalibrationError: the LP solver failed (``data`` holds the inputs).
    """
    from scipy.optimize import linprog

    a = np.asarray(features, dtype=float)
    e = np.asarray(energy_j, dtype=float).ravel()
    if a.ndim != 2 or a.shape[1] != len(ENERGY_TERMS) or a.shape[0] != e.size:
        raise InvalidRequestError(
            f"features must be (runs, {len(ENERGY_TERMS)}) matching energy_j; got {a.shape}"
        )
    if e.size < len(ENERGY_TERMS) or not (np.isfinite(a).all() and np.isfinite(e).all()):
        raise InvalidRequestError("need finite data and at least as many runs as constants")
    col = np.abs(a).max(axis=0)
    col[col == 0] = 1.0
    e_scale = float(np.abs(e).max()) or 1.0
    an = a / col
    en = e / e_scale
    n, p = an.shape
    # variables: x (p, >= 0) then u (n, >= 0); minimise sum(u) with -u <= A x - e <= u
    c = np.concatenate([np.zeros(p), np.ones(n)])
    eye = np.eye(n)
    a_ub = np.vstack([np.hstack([an, -eye]), np.hstack([-an, -eye])])
    b_ub = np.concatenate([en, -en])
    res = linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=[(0, None)] * (p + n), method="highs")
    if not res.success:
        raise CalibrationError(f"energy LP failed: {res.message}", data={"features": a, "e": e})
    x = res.x[:p] * e_scale / col
    return StencilEnergyConstants(*(float(v) for v in x))


def hhc_energy_features(
    stencil: Any, size: Sequence[int], steps: int, t_s1: Any, t_t: Any, t_s2: Any = 1,
    t_s3: Any = 1, time_s: Any = 0.0,
) -> np.ndarray:  # fmt: skip
    """App. B counts of a tiled stencil run, one row per tile choice (columns ENERGY_TERMS).

    N_tiles = 2·T·S1·Π(S_k + t_t)/(t_t·q·(2·t_s1 + t_t − 2)), q = t_s2·t_s3;
    M_io = 2q(t_s1 + 2t_t) global words; V_tile = q·t_t(2t_s1 + t_t − 2)/2 points, each reading
    ``stencil.shared_reads`` shared words and writing one. ``time_s`` is the run's (measured or
    modelled) time, multiplied by P_stat.
    """
    t_s1, t_t, t_s2, t_s3, time_s = np.broadcast_arrays(
        *(np.asarray(v, dtype=float) for v in (t_s1, t_t, t_s2, t_s3, time_s))
    )
    dims = len(size)
    q = (t_s2 if dims >= 2 else 1.0) * (t_s3 if dims == 3 else 1.0)
    pitch = 2 * t_s1 + t_t - 2
    n_tiles = 2.0 * steps * size[0] / (t_t * pitch)
    for k in range(1, dims):
        n_tiles = n_tiles * (size[k] + t_t)
    n_tiles = n_tiles / q
    m_io = 2.0 * q * (t_s1 + 2 * t_t)
    v_tile = q * t_t * pitch / 2.0
    return np.stack(
        [
            time_s,
            n_tiles * m_io,
            n_tiles * v_tile * (stencil.shared_reads + 1),
            n_tiles * v_tile * stencil.fadd,
            n_tiles * v_tile * stencil.fmul,
        ],
        axis=-1,
    )
