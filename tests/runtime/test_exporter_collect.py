"""One scrape of the metrics collector, read back through prometheus-client's own text
exposition: a simulated board's clock, rails and policy, a device that cannot be read, and a
policy provider that fails."""

from __future__ import annotations

import pytest

pytest.importorskip("prometheus_client", reason="pip install 'gpu-governor[metrics]'")

from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from governor.devices.registry import open_device  # noqa: E402
from governor.errors import GovernorError  # noqa: E402
from governor.runtime.exporter import DeviceCollector  # noqa: E402
from governor.timebase import WallClock  # noqa: E402


def _scrape(collector):
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    text = generate_latest(registry).decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


@pytest.fixture
def orin():
    device = open_device("sim:agx-orin", clock=WallClock())
    device.acquire(command="test")
    yield device
    device.restore()
    device.close()


def test_a_scrape_shows_the_locked_clock_in_hz_every_rail_and_the_policy(orin):
    clock = orin.supported_clocks_mhz()[3]
    orin.lock_gpu_clocks(clock)
    rails = {r.name: r.scope for r in orin.sample().rails}
    metrics = _scrape(
        DeviceCollector(
            [orin], lambda d: {"policy": "ppw", "source": "job 7", "budget_remaining_j": 5}
        )
    )
    labels = {
        "uuid": orin.identity.uuid or orin.identity.key or orin.uri,
        "board": orin.identity.model,
        "device": orin.uri,
    }
    assert metrics["governor_device_up"] == [(labels, 1.0)]
    graphics = [v for lab, v in metrics["governor_clock_hertz"] if lab["domain"] == "graphics"]
    assert graphics == [clock * 1e6]
    power = {lab["rail"]: lab["scope"] for lab, _ in metrics["governor_power_watts"]}
    assert power == rails and len(rails) > 1
    assert metrics["governor_policy_info"] == [(dict(labels, policy="ppw", source="job 7"), 1.0)]
    assert metrics["governor_budget_remaining_joules"] == [(labels, 5.0)]


class _Unreadable:
    def __init__(self, device):
        self.identity = device.identity
        self.uri = device.uri

    def sample(self):
        raise GovernorError("the driver went away")


def test_an_unreadable_device_is_down_and_a_failing_provider_leaves_policy_none(orin):
    def provider(device):
        raise RuntimeError("provider bug")

    metrics = _scrape(DeviceCollector([_Unreadable(orin), orin], provider))
    up = sorted(v for _, v in metrics["governor_device_up"])
    assert up == [0.0, 1.0]
    assert {lab["policy"] for lab, _ in metrics["governor_policy_info"]} == {"none"}
    assert len(metrics["governor_policy_info"]) == 1  # the unreadable device has no series
    assert "governor_budget_remaining_joules" not in metrics
