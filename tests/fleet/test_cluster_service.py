"""The cluster budget service's rounds (issue 45) against nodes that answer as the daemons do,
without Slurm: the order of the cap requests keeps the sum within the budget after each one,
whatever fails; silent nodes' caps are held; recovery reads what the nodes hold.
(tests/fleet/test_real_cluster.py runs the same service on a real two-node Slurm.)
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import pytest

from governor.errors import GovernorError
from governor.fleet.allocate import BudgetTooSmallError
from governor.fleet.cluster_service import ClusterService, JobOnGpu, parse_jobs

RANGES = {"nvml:0": (100.0, 400.0), "nvml:1": (60.0, 70.0)}  # an A100 and a T4 per node


class Nodes:
    """Two nodes' GPUs as their daemons would hold them; ``silent`` nodes raise."""

    def __init__(self, limits: Optional[Dict[Tuple[str, str], float]] = None) -> None:
        self.limits = {(n, u): RANGES[u][1] for n in ("node1", "node2") for u in RANGES}
        self.limits.update(limits or {})
        self.silent: set = set()
        self.no_cap: set = set()  # nodes whose daemon does not allow cap
        self.fail_caps: set = set()  # (node, uri) whose cap request fails after applying
        self.sums: List[float] = []

    def ask(self, node: str, request: Dict) -> Dict:
        if node in self.silent:
            raise GovernorError(f"no daemon at {node}")
        if request["action"] == "status":
            return {
                "daemon": {"allow": ["status", "reset"] if node in self.no_cap else ["cap"]},
                "devices": [
                    {
                        "uri": uri,
                        "cluster": {
                            "power_limit_range_w": list(RANGES[uri]),
                            "power_limit_w": self.limits[(node, uri)],
                            "power_w": self.limits[(node, uri)] * 0.95,
                            "uuid": f"GPU-{node}-{uri}",
                            "model": "a100-sxm" if uri == "nvml:0" else "t4",
                        },
                    }
                    for uri in RANGES
                ],
            }
        key = (node, request["device"])
        lo, hi = RANGES[request["device"]]
        assert lo <= request["power_w"] <= hi
        assert request["fallback_w"] <= request["power_w"]
        self.limits[key] = request["power_w"]
        self.sums.append(sum(self.limits.values()))
        if key in self.fail_caps:
            raise GovernorError("timed out")
        return {"lease": {"cap_w": request["power_w"]}}


class Slurm:
    def __init__(self) -> None:
        self.running: Dict[Tuple[str, int], JobOnGpu] = {}

    def nodes(self):
        return ["node1", "node2"]

    def jobs(self):
        return dict(self.running)


def service(nodes, slurm, budget_w=600.0):
    return ClusterService(budget_w, slurm=slurm, ask=nodes.ask, period_s=1.0)


def test_every_cap_request_keeps_the_sum_within_the_budget_from_defaults_to_a_split():
    nodes, slurm = Nodes(), Slurm()  # all at their defaults: 940 W
    svc = service(nodes, slurm)
    svc.start_check()
    svc.step()
    assert nodes.limits == {
        ("node1", "nvml:0"): 100.0,
        ("node1", "nvml:1"): 60.0,
        ("node2", "nvml:0"): 100.0,
        ("node2", "nvml:1"): 60.0,
    }
    slurm.running = {("node1", 0): JobOnGpu("7", "compute"), ("node2", 0): JobOnGpu("8", "memory")}
    nodes.sums.clear()
    svc.step()
    assert max(nodes.sums) <= 600.0 + 1e-6
    assert nodes.limits[("node1", "nvml:0")] > nodes.limits[("node2", "nvml:0")] + 50
    # the memory job ends and a compute job starts on node2: node2's A100 is lowered first
    slurm.running = {("node1", 0): JobOnGpu("7", "compute"), ("node2", 1): JobOnGpu("9", "compute")}
    nodes.sums.clear()
    svc.step()
    assert max(nodes.sums) <= 600.0 + 1e-6
    assert nodes.limits[("node2", "nvml:0")] == 100.0


def test_a_silent_node_keeps_its_caps_counted_and_nothing_is_handed_out_twice():
    nodes, slurm = Nodes(), Slurm()
    svc = service(nodes, slurm)
    slurm.running = {("node1", 0): JobOnGpu("7", "compute"), ("node2", 0): JobOnGpu("8", "compute")}
    svc.step()
    held = nodes.limits[("node2", "nvml:0")] + nodes.limits[("node2", "nvml:1")]
    nodes.silent.add("node2")
    slurm.running = {("node1", 0): JobOnGpu("7", "compute")}  # node2's job ended
    svc.step()
    svc.step()
    assert nodes.limits[("node1", "nvml:0")] + 60.0 + held <= 600.0 + 1e-6
    # back: its idle GPUs are lowered first, then node1 gets the share
    nodes.silent.clear()
    nodes.sums.clear()
    svc.step()
    assert max(nodes.sums) <= 600.0 + 1e-6
    assert nodes.limits[("node2", "nvml:0")] == 100.0
    assert nodes.limits[("node1", "nvml:0")] == pytest.approx(380.0)


def test_a_cap_that_is_not_confirmed_counts_at_the_higher_value():
    nodes, slurm = Nodes(), Slurm()
    svc = service(nodes, slurm)
    svc.step()
    nodes.fail_caps.add(("node1", "nvml:0"))  # applied by the node, the reply lost
    slurm.running = {("node1", 0): JobOnGpu("7", "compute"), ("node2", 0): JobOnGpu("8", "compute")}
    nodes.sums.clear()
    svc.step()
    assert max(nodes.sums) <= 600.0 + 1e-6
    assert svc.gpus["node1/nvml:0"].cap_w == nodes.limits[("node1", "nvml:0")]


def test_a_restarted_service_starts_from_what_the_nodes_hold():
    nodes = Nodes({("node1", "nvml:0"): 150.0, ("node2", "nvml:0"): 100.0})
    nodes.limits[("node1", "nvml:1")] = nodes.limits[("node2", "nvml:1")] = 60.0
    slurm = Slurm()
    slurm.running = {("node1", 0): JobOnGpu("7", "compute")}
    svc = service(nodes, slurm)
    svc.poll()
    assert svc.gpus["node1/nvml:0"].cap_w == 150.0
    svc.step()
    assert nodes.limits[("node1", "nvml:0")] == pytest.approx(380.0)


def test_a_budget_below_the_lowest_caps_is_refused_with_the_least_that_works():
    svc = service(Nodes(), Slurm(), budget_w=300.0)
    with pytest.raises(BudgetTooSmallError) as err:
        svc.start_check()
    assert err.value.least_budget_w == 320.0
    assert "the least budget that works is 320 W" in str(err.value)


def test_no_daemon_answering_is_one_line():
    nodes = Nodes()
    nodes.silent.update({"node1", "node2"})
    with pytest.raises(GovernorError, match="no node daemon answers \\(node1, node2\\)"):
        service(nodes, Slurm()).start_check()


SCONTROL = """\
JobId=7 JobName=wrap
   JobState=RUNNING Reason=None Dependency=(null)
   Partition=debug AllocNode:Sid=localhost:1
   NodeList=node1
     Nodes=node1 CPU_IDs=0 Mem=0 GRES=gpu:a100:1(IDX:0)
   Comment=governor:load=memory

JobId=8 JobName=wrap
   JobState=PENDING Reason=Resources
   Partition=debug
     Nodes=node2 CPU_IDs=0 Mem=0 GRES=gpu:t4:1(IDX:1)

JobId=9 JobName=big
   JobState=RUNNING Reason=None
   Partition=gpu
   NodeList=node[1-2]
     Nodes=node[1-2] CPU_IDs=0 Mem=0 GRES=gpu:t4:1(IDX:1)
"""


def test_jobs_are_read_from_scontrol_by_node_and_gpu_index():
    jobs = parse_jobs(SCONTROL)
    assert jobs == {
        ("node1", 0): JobOnGpu("7", "memory"),
        ("node1", 1): JobOnGpu("9", "mixed"),
        ("node2", 1): JobOnGpu("9", "mixed"),
    }
    assert set(parse_jobs(SCONTROL, partition="gpu")) == {("node1", 1), ("node2", 1)}


def test_the_metrics_show_the_budget_each_gpus_cap_and_power_and_silent_nodes():
    pytest.importorskip("prometheus_client", reason="pip install 'gpu-governor[metrics]'")
    import urllib.request

    from governor.runtime.exporter import serve_cluster_metrics

    nodes, slurm = Nodes(), Slurm()
    svc = service(nodes, slurm)
    slurm.running = {("node1", 0): JobOnGpu("7", "compute")}
    svc.step()
    nodes.silent.add("node2")
    svc.step()
    server = serve_cluster_metrics(svc.snapshot, "127.0.0.1:0")
    try:
        url = f"http://127.0.0.1:{server.port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as answer:
            text = answer.read().decode()
    finally:
        server.close()
    lines = set(text.splitlines())
    assert "governor_cluster_budget_watts 600.0" in lines
    assert "governor_cluster_allocated_watts 600.0" in lines
    assert "governor_cluster_rounds_total 2.0" in lines
    assert 'governor_cluster_node_up{node="node1"} 1.0' in lines
    assert 'governor_cluster_node_up{node="node2"} 0.0' in lines
    cap = (
        'governor_cluster_gpu_cap_watts{gpu="nvml:0",node="node1",'
        'slurm_job="7",uuid="GPU-node1-nvml:0"} 380.0'
    )
    assert cap in lines
    assert any(
        line.startswith('governor_cluster_gpu_power_watts{gpu="nvml:1",node="node2"')
        for line in lines
    )


def test_a_job_that_starts_or_ends_starts_a_round_before_the_period_is_over():
    import threading

    nodes, slurm = Nodes(), Slurm()
    svc = ClusterService(600.0, slurm=slurm, ask=nodes.ask, period_s=3600.0)
    svc.watch_s = 0.02
    runner = threading.Thread(target=svc.run, daemon=True)
    runner.start()
    try:
        wait = threading.Event()
        for _ in range(500):
            if svc.rounds >= 1:
                break
            wait.wait(0.02)
        assert svc.rounds == 1
        slurm.running = {("node1", 0): JobOnGpu("7", "compute")}
        for _ in range(500):
            if svc.rounds >= 2:
                break
            wait.wait(0.02)
        assert nodes.limits[("node1", "nvml:0")] == pytest.approx(380.0)
        assert svc.rounds == 2  # one for the start, none for the (hour-long) period
    finally:
        svc.stop()
        runner.join(5)


def test_a_daemon_that_does_not_allow_cap_is_refused_at_start_in_one_line():
    nodes = Nodes()
    nodes.no_cap.add("node2")
    with pytest.raises(GovernorError) as err:
        service(nodes, Slurm()).start_check()
    assert str(err.value) == (
        'the daemon on node2 does not allow cap: add "cap" to allow in its config '
        "(governor-daemon.toml)"
    )


def test_a_node_never_heard_from_stops_every_raise_until_it_answers():
    """Its GPUs may sit at any limit (the driver's default): with them unknown, the sum in
    force cannot be bounded, so caps are only lowered or renewed until it answers."""
    nodes, slurm = Nodes(), Slurm()
    nodes.silent.add("node2")  # down since before the service started
    svc = service(nodes, slurm)
    svc.step()  # node1 lowered to its floor
    slurm.running = {("node1", 0): JobOnGpu("7", "compute")}
    svc.step()
    svc.step()
    assert nodes.limits[("node1", "nvml:0")] == 100.0  # not raised: node2's 470 W unknown
    nodes.silent.clear()  # node2 answers: lowered first, then node1 raised within the budget
    nodes.sums.clear()
    svc.step()
    # node2 sat at its defaults (470 W): the sum falls to the budget, then never rises above it
    first_within = next(i for i, total in enumerate(nodes.sums) if total <= 600.0 + 1e-6)
    assert nodes.sums[:first_within] == sorted(nodes.sums[:first_within], reverse=True)
    assert max(nodes.sums[first_within:]) <= 600.0 + 1e-6
    assert nodes.limits[("node1", "nvml:0")] > 300.0
