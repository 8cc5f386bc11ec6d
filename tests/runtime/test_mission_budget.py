"""The mission budget as one part (runtime/budget.py), the typed records status() is made
of (runtime/status.py), and the controllers that hold a budget (issue 44)."""

from __future__ import annotations

import dataclasses

import pytest

from governor.errors import InvalidRequestError
from governor.runtime.battery_controller import BatteryController
from governor.runtime.budget import BudgetState, MissionBudget, budget_and_reserve
from governor.runtime.controller_base import Controller, Observation
from governor.runtime.floor_controller import FloorThroughputController
from governor.runtime.model import ClockModel
from governor.runtime.policies import Battery, Throughput
from governor.runtime.status import Correction, RunTotals, find_record, status_doc
from governor.runtime.unmet import UnmetWatch

MODEL = ClockModel(
    (300.0, 600.0, 900.0), (20.0, 40.0, 80.0), (3.0, 1.5, 1.0), 10.0, 600.0, True, "t"
)


def _obs(elapsed_s, used_j, *, dt_s=1.0, power_w=50.0, busy=True, board_used_j=None):
    return Observation(
        t_s=elapsed_s,
        dt_s=dt_s,
        power_w=power_w,
        clock_mhz=600.0,
        applied_mhz=600.0,
        energy_used_j=used_j,
        elapsed_s=elapsed_s,
        busy=busy,
        board_power_w=power_w + 5.0,
        board_energy_used_j=board_used_j,
    )


def test_the_budget_meters_its_scope_and_finds_when_it_ran_out():
    budget = MissionBudget(100.0, 0.0, 10.0, "board")
    budget.start()
    assert budget.state().target_power_w == pytest.approx(10.0)  # 100 J over 10 s
    budget.observe(_obs(1.0, 20.0, board_used_j=40.0))
    budget.account(_obs(1.0, 20.0, board_used_j=40.0))
    assert budget.state().remaining_j == 60.0  # the board's energy, not the GPU figure's
    assert budget.state().target_power_w == pytest.approx(60.0 / 9.0)
    # 60 J left, 120 J spent in the next second: it ran out half way through it
    budget.account(_obs(2.0, 50.0, board_used_j=160.0))
    state = budget.state()
    assert state.remaining_j == -60.0 and state.exhausted_at_s == pytest.approx(1.5)
    budget.account(_obs(3.0, 60.0, board_used_j=200.0))
    assert budget.state().exhausted_at_s == pytest.approx(1.5)  # said once, when it crossed
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.remaining_j = 1.0  # type: ignore[misc]


def test_a_battery_that_says_less_wins_and_a_failed_read_is_reported():
    readings = iter([30.0, OSError("i2c timeout")])

    def battery():
        value = next(readings)
        if isinstance(value, Exception):
            raise value
        return value

    budget = MissionBudget(100.0, 0.0, 10.0, "gpu", reader=battery)
    budget.account(_obs(1.0, 20.0))
    assert budget.state().remaining_j == 30.0 and budget.state().battery_read_error is None
    budget.account(_obs(2.0, 25.0))
    assert budget.state().remaining_j == 75.0  # the meter's figure kept
    assert budget.state().battery_read_error == "OSError: i2c timeout"


def test_the_reserve_is_a_share_of_the_battery_capacity_or_of_the_budget():
    class Battery_:
        def __call__(self):
            return 500.0

        def capacity_j(self):
            return 1000.0

    assert budget_and_reserve(200.0, 0.1, None) == (200.0, 20.0)
    assert budget_and_reserve(None, None, Battery_()) == (500.0, 10.0)  # 1 % of full
    with pytest.raises(InvalidRequestError, match="battery_wh"):
        budget_and_reserve(None, None, None)


def test_the_floor_holds_a_budget_and_no_battery_controller():
    policy = Throughput(rate_hz=30.0, energy_j=500.0, duration_s=60.0)
    floor = FloorThroughputController(MODEL, policy, policy.floor())
    assert not any(isinstance(v, BatteryController) for v in vars(floor).values())
    floor.initial_mhz()
    floor.decide(_obs(1.0, 40.0, board_used_j=45.0), [], 900.0)
    state = floor.budget_state()
    assert isinstance(state, BudgetState)
    assert state.remaining_j == 455.0 and state.scope == "board"
    doc = floor.status()
    assert doc["remaining_j"] == 455.0 and doc["rate_target_hz"] == 30.0
    assert "model_correction" not in doc  # it runs no power tracker of a battery


def test_status_is_the_records_in_order_and_a_key_given_twice_is_refused():
    battery = BatteryController(MODEL, Battery(energy_j=1000.0, duration_s=60.0))
    battery.initial_mhz()
    records = battery.records()
    assert find_record(records, BudgetState) == battery.budget_state()
    assert find_record(records, Correction) == Correction(None)  # nothing measured yet
    doc = battery.status()
    assert list(doc)[:3] == ["budget_j", "scope", "remaining_j"]
    assert list(doc)[-1] == "model_correction"
    assert status_doc(RunTotals(1.0, 2.0)) == {"duration_s": 1.0, "energy_j": 2.0}
    with pytest.raises(ValueError, match="'model_correction'.*given twice"):
        status_doc(Correction(1.0), Correction(2.0))


def test_the_budget_note_reads_the_budget_state_not_a_dictionary():
    said = []
    watch = UnmetWatch("sim:t", said.append)
    policy = Battery(energy_j=100.0, duration_s=10.0, scope="gpu")
    watch.new_policy(policy, MODEL)

    class Spent(Controller):
        def budget_state(self):
            return BudgetState(100.0, "gpu", -5.0, 10.0, None, None, 1.0, 4.25, None)

        def status(self):  # a renamed key must not switch the note off
            return {}

    watch.observe(_obs(5.0, 105.0), Spent(MODEL))
    assert said == [
        "the energy budget of 100 J (0.0278 Wh) ran out 4.25 s into the mission: it cannot "
        "last the rest of the 10 s mission"
    ]


def test_the_safe_hold_observes_the_budget_and_chooses_nothing(profile_of):
    import governor
    from governor.runtime import Governor

    dev = governor.open_device("sim:agx-orin?stuck_after_s=5")
    dev.run_workload("compute")
    spec = {"policy": "battery", "energy_j": 5000.0, "duration_s": 600.0, "scope": "gpu"}
    with Governor(dev, spec, profile=profile_of("agx-orin"), background=False) as gov:
        calls = {"observe": 0, "choose": 0}
        for name in calls:
            real = getattr(gov.controller, name)

            def counted(*args, real=real, name=name):
                calls[name] += 1
                return real(*args)

            setattr(gov.controller, name, counted)
        for _ in range(30):
            gov.step()
        assert not gov.state().safe_hold and calls == {"observe": 30, "choose": 30}
        for _ in range(200):
            gov.step()
            if gov.state().safe_hold:
                break
        assert gov.state().safe_hold and "stuck" in gov.state().safe_hold_reason
        chosen, left_j = calls["choose"], gov.controller.budget_state().remaining_j
        for _ in range(10):
            gov.step()
        assert gov.state().safe_hold
        assert calls["choose"] == chosen  # no choice in the hold
        assert gov.controller.budget_state().remaining_j < left_j  # but the budget is metered
