"""The simulated board's read path, made cheaper for the control step (issue 15, item 7):
records built without the dataclass ``__init__``, rails planned once per board and reused
while they read the same, and the GPU power's temperature-free terms remembered per clock.
Each shortcut must give what the plain computation gives."""

from __future__ import annotations

import dataclasses

import pytest

import governor
from governor.devices.base import Rail, Sample, frozen_record
from governor.devices.sim.catalog import board_names
from governor.runtime.controller_base import Observation, Tick


def _fields(record):
    return {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}


@pytest.mark.parametrize(
    "record",
    [
        Rail("VDD_IN", 4.5, "board input", 5.0, 0.9),
        Sample(t_s=1.0, power_w=2.0, power_scope="gpu", rails=(Rail("gpu", 2.0, "gpu"),)),
        Observation(1.0, 0.1, 2.0, 900.0, 900.0, 3.0, 1.0, True, 4.0, 5.0, 1.5),
        Tick(1.0, 1.0, 0.05, 900.0),
    ],
)
def test_frozen_record_equals_the_dataclass_constructor(record):
    cls = type(record)
    fields = _fields(record)
    made = frozen_record(cls, dict(fields))
    assert type(made) is cls
    assert made == record and hash(made) == hash(record) and repr(made) == repr(record)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(made, dataclasses.fields(made)[0].name, None)
    # the fields in another order are the same record (the names are checked as a set)
    shuffled = frozen_record(cls, dict(reversed(list(fields.items()))))
    assert shuffled == record and repr(shuffled) == repr(record)
    missing = dict(fields)
    missing.pop(next(iter(missing)))
    with pytest.raises(TypeError):
        frozen_record(cls, missing)
    with pytest.raises(TypeError):
        frozen_record(cls, {**fields, "unknown": 1.0})


def test_frozen_record_refuses_a_class_that_validates_in_post_init():
    from governor.devices.base import PowerLimitRange

    with pytest.raises(TypeError):
        frozen_record(PowerLimitRange, {"min_w": 300.0, "max_w": 100.0, "default_w": 200.0})


@pytest.mark.parametrize("board", list(board_names()))
def test_planned_rails_read_what_the_board_spec_says(board):
    """A device whose sensors freeze at once reads its rails from
    ``BoardSpec.rail_powers_w`` (the plain sums over the board's domains); a live one
    reads them from the per-rail plan. At the same instant both read the same."""
    plain = governor.open_device(f"sim:{board}?stuck_after_s=0")
    planned = governor.open_device(f"sim:{board}")
    for dev in (plain, planned):
        dev.run_workload("compute")
        dev.lock_gpu_clocks(dev.supported_clocks_mhz()[-2])
        dev.clock.sleep(2.0)
    a, b = plain.sample(), planned.sample()
    plain.close()
    planned.close()
    assert a.rails == b.rails
    assert (a.power_w, a.power_scope, a.board_power_w) == (
        b.power_w,
        b.power_scope,
        b.board_power_w,
    )
    assert a.throttle_reasons == b.throttle_reasons and "clocks_setting" in a.throttle_reasons


def test_a_rail_reading_the_same_is_the_same_record_and_a_changed_one_is_new():
    dev = governor.open_device("sim:agx-orin")
    dev.run_workload("compute")
    dev.clock.sleep(1.0)
    first = dev.sample()
    dev.lock_gpu_clocks(dev.supported_clocks_mhz()[0])
    dev.clock.sleep(1.0)
    second = dev.sample()
    dev.close()
    gpu = [i for i, r in enumerate(first.rails) if r.name == "VDD_GPU_SOC"][0]
    assert second.rails[gpu].power_w < first.rails[gpu].power_w  # a new reading, rebuilt
    fixed = [i for i, (x, y) in enumerate(zip(first.rails, second.rails)) if x == y]
    assert fixed, "agx-orin has rails the GPU's clock does not move"
    assert all(first.rails[i] is second.rails[i] for i in fixed)
    # and the board's input follows the rails that changed
    assert second.board_power_w < first.board_power_w


def test_the_gpu_power_terms_kept_per_clock_do_not_keep_the_temperature():
    """The cached terms (all but the static power) give, at any temperature, what a board
    with an empty cache computes; and two workloads at one clock are not mixed up."""
    dev = governor.open_device("sim:titan-x")
    spec = dev.board
    clock = spec.clocks_mhz[len(spec.clocks_mhz) // 2]
    loads = [spec.workloads[name] for name in dev.workloads()]
    warm = {}
    for temperature in (30.0, 55.5, 80.25):
        for load in loads + [None]:
            warm[(temperature, id(load))] = spec._gpu_power_w(clock, temperature, load, None)
    for temperature in (30.0, 55.5, 80.25):
        for load in loads + [None]:
            spec.__dict__.pop("_terms_cache", None)
            cold = spec._gpu_power_w(clock, temperature, load, None)
            assert warm[(temperature, id(load))] == cold
    # the workloads differ at this clock, so a mix-up would show
    assert len({warm[(55.5, id(load))] for load in loads}) > 1


@pytest.mark.parametrize("board", ["agx-orin", "orin-nano", "a100-sxm"])
def test_rail_readings_kept_by_current_are_the_readings_built_afresh(board, monkeypatch):
    """Two devices of one board read alike, one keeping its INA3221 rails' readings by
    current and one keeping only the last (its store forgotten at every new current): the
    same samples, read after read, while the load and the clock move; a reading that
    repeats comes back as the very record kept (on a board with INA3221 sensors)."""
    kept = governor.open_device(f"sim:{board}")
    fresh = governor.open_device(f"sim:{board}")
    monkeypatch.setattr(fresh, "RAILS_SEEN", 0)  # full at once: cleared at each new current
    clocks = kept.supported_clocks_mhz()
    samples = []
    for k in range(300):
        for dev in (kept, fresh):
            if k % 100 == 0:
                dev.run_workload(("compute", "memory", "compute")[k // 100])
            if k % 7 == 0:
                dev.lock_gpu_clocks(clocks[(k // 7) % len(clocks)])
            dev.clock.sleep(0.1)
        a, b = kept.sample(), fresh.sample()
        assert a == b
        assert a.rails == b.rails and [repr(r) for r in a.rails] == [repr(r) for r in b.rails]
        samples.append(a)
    ina = kept.board.sensor == "ina3221"
    kept.close()
    fresh.close()
    again = [
        (x, y)
        for s in samples
        for t in samples
        if s is not t
        for x, y in zip(s.rails, t.rails)
        if x == y and x.current_a is not None
    ]
    if ina:
        assert again and all(x is y for x, y in again)
