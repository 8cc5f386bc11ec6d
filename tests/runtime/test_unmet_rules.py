"""The rules behind what the Governor says it cannot meet (:mod:`governor.runtime.unmet`), at
their edges: which requested clocks are clamped or snapped, how long the lowest clock must
be measured above a cap before the cap is said unmeetable and with what figure, and how a
budget's note names its scope and size. Each is checked against the simulated board's own
state (its locked clocks, its true energy)."""

from __future__ import annotations

import pytest

from governor.runtime import Governor
from governor.runtime.unmet import CLOCK_TOLERANCE_MHZ, clock_note

CLOCKS = (300.0, 315.0, 330.0)


@pytest.mark.parametrize(
    "asked, words",
    [
        (330.0 + CLOCK_TOLERANCE_MHZ * 0.8, None),  # the top clock, as the device snaps it
        (330.0 + CLOCK_TOLERANCE_MHZ, None),
        (300.0 - CLOCK_TOLERANCE_MHZ, None),
        (315.0 + CLOCK_TOLERANCE_MHZ, None),
        (330.0 + CLOCK_TOLERANCE_MHZ * 1.2, "above b's top clock: clamped to 330 MHz"),
        (300.0 - CLOCK_TOLERANCE_MHZ * 0.8, None),
        (300.0 - CLOCK_TOLERANCE_MHZ * 1.2, "below b's lowest clock: clamped to 300 MHz"),
        (315.0 + CLOCK_TOLERANCE_MHZ * 0.8, None),
        (315.0 - CLOCK_TOLERANCE_MHZ * 1.2, "snapped to the nearest, 315 MHz"),
        (301.0, "snapped to the nearest, 300 MHz"),
        (315.0, None),
    ],
)
def test_which_clocks_are_clamped_or_snapped(asked, words):
    note = clock_note(asked, CLOCKS, "b")
    if words is None:
        assert note is None
    else:
        assert note is not None and note.startswith(f"clock {asked:g} MHz") and words in note


def test_the_tolerance_is_the_devices_half_megahertz():
    assert CLOCK_TOLERANCE_MHZ == 0.5  # what Device snaps within (a sysfs table in kHz)


@pytest.fixture
def nano(busy_sim):
    return busy_sim("orin-nano")


def test_a_clock_below_the_lowest_is_clamped_to_it_and_said(nano):
    lowest = nano.supported_clocks_mhz()[0]
    # 100 MHz: below the lowest (306) but not off by an order of magnitude (1 MHz would be a
    # unit slip, refused: test_feasibility)
    gov = Governor(nano, {"policy": "clock", "clock_mhz": 100}, background=False)
    with gov:
        gov.step()
        locked = nano.state().gpu_clocks_mhz
        notes = gov.status()["unmet"]
    assert locked == (lowest, lowest)
    assert notes == [
        f"clock 100 MHz is below sim:orin-nano's lowest clock: clamped to {lowest:g} MHz"
    ]


@pytest.fixture
def t4(busy_sim):
    return busy_sim("t4")  # meters energy: a period's mean power is exact


def test_a_cap_is_said_unmeetable_after_three_periods_at_the_lowest_clock_with_their_power(t4):
    lowest = t4.supported_clocks_mhz()[0]
    gov = Governor(t4, {"policy": "power-cap", "cap_w": 1.0}, background=False)
    held = []  # per step: (the clock the period ran at, its true mean power, said by now)
    with gov:
        for _ in range(40):
            ran_at = t4.state().gpu_clocks_mhz[0]
            t0, e0 = t4.clock.now_s(), t4.true_energy_j()
            gov.step()
            true_w = (t4.true_energy_j() - e0) / (t4.clock.now_s() - t0)
            held.append((ran_at, true_w, bool(gov.status()["unmet"])))
        notes = gov.status()["unmet"]
    said_at = [i for i, (_, _, said) in enumerate(held) if said][0]
    run = 0  # periods at the lowest clock in a row, up to the one that said it
    for ran_at, _, _ in reversed(held[: said_at + 1]):
        if ran_at != lowest:
            break
        run += 1
    assert run == 3  # min(the cap's 1 s window, three 0.1 s periods), not sooner
    mean_w = sum(w for _, w, _ in held[said_at - 2 : said_at + 1]) / 3
    assert len(notes) == 1
    text = notes[0]
    assert f"({lowest:g} MHz: {mean_w:.3g} W measured)" in text
    assert text.startswith("the power cap 1 W is below what sim:t4 draws at its lowest clock")


def test_the_budget_note_names_its_size_in_wh_and_the_board_scope(t4):
    budget_j = 4.4462  # 0.001235 Wh: the note's Wh is the budget's, to three digits
    for scope, where in (("board", ", metered on the board:"), ("gpu", " into the mission:")):
        spec = {"policy": "battery", "energy_j": budget_j, "hours": 1, "scope": scope}
        gov = Governor(t4, spec, background=False)
        with gov:
            t4.clock.sleep(0.5)
        (note,) = gov.status()["unmet"]
        assert note.startswith(f"the energy budget of 4.446 J ({budget_j / 3600:.3g} Wh) ran out")
        assert where in note and note.count("metered") == (scope == "board")


def test_a_cap_exceeded_at_the_lowest_clock_in_bursts_shorter_than_its_window_is_not_said(t4):
    # between the T4's idle power at its lowest clock (about 27 W) and its busy power there
    # (about 32 W): the lowest clock keeps the cap whenever the app pauses
    cap_w = 29.5
    lowest = t4.supported_clocks_mhz()[0]
    gov = Governor(t4, {"policy": "power-cap", "cap_w": cap_w}, background=False)
    over = []  # per period: whether it ran at the lowest clock above the cap (true power)
    said = []
    with gov:
        for i in range(60):
            if i < 45 and i % 3 == 2:  # two periods of frames, one of rest
                t4.stop_workload()
            else:
                t4.run_workload("compute")
            ran_at = t4.state().gpu_clocks_mhz[0]
            t0, e0 = t4.clock.now_s(), t4.true_energy_j()
            gov.step()
            true_w = (t4.true_energy_j() - e0) / (t4.clock.now_s() - t0)
            over.append(ran_at == lowest and true_w > cap_w)
            said.append(bool(gov.status()["unmet"]))
    first = said.index(True)
    assert first >= 45  # never while it rested every third period
    assert over[first - 2 : first + 1] == [True] * 3  # then after three periods in a row
    assert not any(all(over[j : j + 3]) for j in range(first - 2))
