"""``Governor.set_policy``: a running governor changes policy without letting the device go
(the ROS 2 node's parameter changes use it), and the new policy counts from the switch."""

from __future__ import annotations

import pytest

import governor
from governor.errors import InvalidRequestError
from governor.runtime import Governor


@pytest.fixture
def a100():
    dev = governor.open_device("sim:a100-pcie")
    dev.run_workload("compute")
    yield dev
    dev.stop_workload()
    dev.restore()


def test_switching_keeps_the_device_and_applies_the_new_clock(orin, profile_of, monkeypatch):
    orin.run_workload("compute")
    released = []
    real_release = orin.release
    monkeypatch.setattr(orin, "release", lambda: released.append(1) or real_release())
    gov = Governor(orin, {"policy": "max"}, profile=profile_of("agx-orin"), background=False)
    with gov:
        top = orin.supported_clocks_mhz()[-1]
        gov.step()
        assert orin.state().gpu_clocks_mhz == (top, top)
        original = orin.journal.originals()
        gov.set_policy({"policy": "clock", "clock_mhz": 714})
        # applied at once, by the same owner: nothing was given back in between
        assert orin.state().gpu_clocks_mhz == (714.0, 714.0)
        assert released == [] and orin.owned and orin.journal.originals() == original
        assert gov.status()["policy"] == "clock" and gov.status()["running"]
        gov.step()
        assert orin.state().gpu_clocks_mhz == (714.0, 714.0)
    assert released == [1] and orin.state().gpu_clocks_mhz is None and not orin.changed


def test_a_bad_policy_is_refused_and_the_running_one_kept(orin, profile_of):
    with Governor(
        orin,
        {"policy": "clock", "clock_mhz": 714},
        profile=profile_of("agx-orin"),
        background=False,
    ) as gov:
        with pytest.raises(InvalidRequestError, match="cap_w"):
            gov.set_policy({"policy": "power-cap"})
        with pytest.raises(InvalidRequestError):
            gov.set_policy({"policy": "clock", "clock_mhz": -5})
        assert gov.policy.name == "clock"
        gov.step()
        assert orin.state().gpu_clocks_mhz == (714.0, 714.0)


def test_a_battery_set_mid_run_counts_energy_from_the_switch(a100, profile_of):
    budget_j = 20000.0
    gov = Governor(a100, {"policy": "max"}, profile=profile_of("a100-pcie"), background=False)
    with gov:
        for _ in range(300):  # 30 s at the top clock first
            gov.step()
        before_j = a100.true_energy_j()
        gov.set_policy(
            {"policy": "battery", "energy_j": budget_j, "duration_s": 120, "scope": "gpu"}
        )
        for _ in range(200):
            gov.step()
        used_j = a100.true_energy_j() - before_j  # the simulator's own integral of its power
        status = gov.status()
        assert status["budget_j"] == budget_j
        assert status["remaining_j"] == pytest.approx(budget_j - used_j, rel=0.01)
        # the run's report still covers the whole run, not only the new policy
        assert gov.report()["energy_j"] == pytest.approx(a100.true_energy_j(), rel=0.01)
        assert gov.report()["duration_s"] == pytest.approx(50.0, abs=0.2)
