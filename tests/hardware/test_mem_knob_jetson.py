"""The battery and power-cap policies' memory knob on the fake AGX Orin tree (issue 48
item 5): its memory clock goes through the BPMP's EMC lock, journaled in the governor's
layer before the write and undone when the governor lets the device go; a memory clock
locked below the governor (``--mem-clock``) leaves the policy the core clock alone.
Assertions read the fake board's BPMP debugfs files and the journal on disk."""

from __future__ import annotations

from test_ppw_pair import journals, orin  # noqa: F401  (orin: the fake board's fixture)

import governor
from governor.runtime.mem_knob import MemoryKnob, memory_knob
from governor.runtime.model import fallback_model


def test_the_knob_locks_the_emc_journaled_and_release_restores_it(orin):  # noqa: F811
    assert orin()[2:] == (0, 3199000000)  # the BPMP scales the EMC: nothing locked
    with governor.open_device("jetson") as dev:
        dev.acquire(command="governor run --policy battery")
        table = tuple(dev.supported_mem_clocks_mhz())
        knob = MemoryKnob(dev, table, 3199.0, 204.0, 1.0)
        knob.apply(204.0)
        assert orin()[2:] == (1, 204000000)
        (journal,) = journals()  # journaled before the write
        originals = {k: v for layer in journal["layers"] for k, v in layer["original"].items()}
        assert originals["mem_clock"] is None  # BPMP's own scaling, to be given back
        dev.release()
        assert orin()[2] == 0 and journals() == []  # the EMC is the BPMP's to scale again


def test_a_memory_clock_pinned_below_the_governor_leaves_no_knob(orin):  # noqa: F811
    with governor.open_device("jetson") as dev:
        model = fallback_model(dev.supported_clocks_mhz(), "test")
        assert memory_knob(dev, "battery", model) is not None  # the EMC may be set
        dev.lock_mem_clock(3199.0)  # governor run --mem-clock 3199
        assert memory_knob(dev, "battery", model) is None
        assert memory_knob(dev, "max", model) is None
        dev.restore()
    assert orin()[2] == 0


def test_the_power_cap_policy_gets_the_knob_only_with_a_pair_and_the_emc_unpinned(
    orin,  # noqa: F811
):
    """Under the power cap the knob only lowers a compute-bound phase's memory clock to the
    pair's: no pair, no knob (the core clock alone, as before issue 48); a pair, a knob that
    locks the EMC through the BPMP as the battery policy's does; an EMC pinned, none."""
    import dataclasses

    with governor.open_device("jetson") as dev:
        dev.acquire(command="governor run --policy power-cap")
        bare = fallback_model(dev.supported_clocks_mhz(), "test")
        paired = dataclasses.replace(bare, ppw_pair_mhz=(918.0, 204.0), pair_drop_w=1.0)
        assert memory_knob(dev, "power-cap", bare) is None
        knob = memory_knob(dev, "power-cap", paired)
        assert knob is not None and knob.capped and knob.low_mhz == 204.0
        knob.apply(204.0)
        assert orin()[2:] == (1, 204000000)
        dev.release()
        assert orin()[2] == 0 and journals() == []
        dev.lock_mem_clock(3199.0)  # governor run --mem-clock 3199
        assert memory_knob(dev, "power-cap", paired) is None
        dev.restore()
    assert orin()[2] == 0
