"""The cluster budget service (issue 45) on a real Slurm with two slurmd (Debian's packages),
each node with its own fake NVML driver (an A100 and a T4 under the real nvidia-ml-py) and its
own governor daemon. The service runs as ``governor cluster`` in a subprocess; the faults are
real: ``scancel``, SIGKILL of the service, of a node's daemon and of a slurmd.

What is checked is each fake driver's state file (the power limits it holds), sampled every
10 ms by a thread for the whole module: the sum over both nodes never exceeds the budget once
the service has capped the GPUs (before it starts they sit at their defaults, 940 W).

The tests run in order on one cluster (~1-2 minutes in all): each leaves it as the next needs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from fleet_services import SLURM_PROGRAMS, free_port, missing, which
from real_cluster import DEFAULT_LIMITS_W, MIN_CAPS_W, Cluster, Sampler, wait_until

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="real Slurm needs root (slurmd runs the prolog as root); run the suite as root",
)

BUDGET_W = 600.0
PERIOD_S = 1.0
LEASE_S = 3.0
SAFE_SHARE_W = BUDGET_W / 4  # the budget over the four GPUs the service knows

CLIENT = """\
import json, socket, sys
path = sys.argv[1]
with socket.socket(socket.AF_UNIX) as s:
    s.connect(path)
    doc = {"action": "cap", "device": "nvml:0", "power_w": 400, "lease_s": 60, "fallback_w": 400}
    s.sendall((json.dumps(doc) + "\\n").encode())
    print(s.makefile().readline(), flush=True)
"""


@pytest.fixture(scope="module")
def cluster(fake_nvml_lib):
    gone = missing(SLURM_PROGRAMS)
    if gone:
        pytest.skip(
            "real Slurm is not installed (missing "
            + ", ".join(gone)
            + "): apt-get install slurmctld slurmd slurm-client munge"
        )
    pytest.importorskip("prometheus_client", reason="the service's metrics need prometheus-client")
    if not Path("/usr/bin/python3").exists():
        pytest.skip("a job's client runs as nobody under /usr/bin/python3")
    # munged wants every directory above its socket searchable by all: not pytest's tmp
    work = Path(tempfile.mkdtemp(prefix="gvc-"))
    cl = Cluster(work, fake_nvml_lib)
    try:
        cl.start()
        cl.start_service(BUDGET_W, PERIOD_S, LEASE_S)
        wait_until("the service's first caps", lambda: cl.total_w() <= BUDGET_W, 60)
        cl.sampler = Sampler(list(cl.nodes.values())).start()
        yield cl
    finally:
        sampler = getattr(cl, "sampler", None)
        if sampler is not None:
            sampler.stop()
        cl.stop()
        if not os.environ.get("GOVERNOR_KEEP_TEST_DIRS"):  # set it to read the logs
            shutil.rmtree(work, ignore_errors=True)


def a100(cl, node):
    return cl.nodes[node].limits_w()[0]


def within_budget(cl):
    cl.sampler.sample()
    assert cl.sampler.samples > 0
    assert cl.sampler.worst_w <= BUDGET_W + 1e-6, (cl.sampler.worst_w, cl.sampler.worst_at)


def rounds_done(cl):
    return float(re.search(r"^governor_cluster_rounds_total (\S+)$", cl.metrics(), re.M).group(1))


def rounds_of(log, pattern):
    return [int(m.group(1)) for m in re.finditer(r"round ([0-9]+): " + pattern, log)]


def test_idle_gpus_sit_at_their_lowest_cap_and_the_metrics_show_the_budget(cluster):
    wait_until(
        "every GPU at its lowest cap",
        lambda: all(caps == MIN_CAPS_W for caps in cluster.limits_w().values()),
    )
    text = cluster.metrics()
    assert "governor_cluster_budget_watts 600.0" in text
    assert re.search(r'governor_cluster_gpu_cap_watts\{.*node="node2".*\} 100\.0', text)
    assert re.search(r'governor_cluster_gpu_power_watts\{.*gpu="nvml:1".*\} ', text)
    within_budget(cluster)


def test_a_budget_below_the_lowest_caps_is_refused_in_one_line(cluster):
    done = subprocess.run(
        [str(cluster.w / "governor"), "cluster", "--budget-w", "300", "--period-s", "1",
         "--daemon-socket", str(cluster.w / "s" / "{node}.sock")],
        env=cluster.stack.env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done
    assert done.stderr.strip().splitlines() == [
        "governor: error: budget 300 W is below the sum of the GPUs' lowest settable caps; "
        "the least budget that works is 320 W"
    ]


def test_two_jobs_of_different_kinds_on_two_nodes_get_different_caps(cluster):
    out = cluster.w / "out"
    client = cluster.w / "client.py"
    client.write_text(CLIENT)
    client.chmod(0o644)
    # the compute job runs as nobody and asks its node's daemon to raise its own cap
    cluster.compute = cluster.submit(
        "-w", "node1", "--gres=gpu:a100:1", "--comment=governor:load=compute",
        "--uid=nobody", "--gid=nogroup", "--chdir=/tmp", "-o", f"{out}/job-%j.out", "--wrap",
        f"/usr/bin/python3 {client} {cluster.nodes['node1'].socket}; sleep 300",
    )  # fmt: skip
    cluster.memory = cluster.submit(
        "-w", "node2", "--gres=gpu:a100:1", "--comment=governor:load=memory", "--wrap", "sleep 300"
    )  # fmt: skip
    wait_until(
        "both A100s above their lowest cap",
        lambda: a100(cluster, "node1") > 150 and a100(cluster, "node2") > 120,
    )
    wait_until("the split to settle", lambda: cluster.total_w() >= BUDGET_W - 5)
    node1, node2 = cluster.limits_w()["node1"], cluster.limits_w()["node2"]
    # a compute-bound job buys more work per watt than a memory-bound one
    assert node1[0] > node2[0] + 50, (node1, node2)
    assert node1[1] == node2[1] == MIN_CAPS_W[1]  # the idle T4s
    answer = out / f"job-{cluster.compute}.out"
    reply = wait_until("the job's own cap request", lambda: answer.exists() and answer.read_text())
    assert '"ok":false' in reply.replace(" ", "") and "may not set power caps" in reply
    assert a100(cluster, "node1") == node1[0]  # unchanged by the job's request
    text = cluster.metrics()
    assert re.search(
        rf'governor_cluster_gpu_cap_watts\{{.*slurm_job="{cluster.compute}".*\}}', text
    )
    within_budget(cluster)


def test_prometheus_shows_the_budget_and_each_gpus_cap_and_power(cluster):
    prometheus = which("prometheus")
    if prometheus is None:
        pytest.skip("prometheus is not installed: apt-get install prometheus")
    port, work = free_port(), cluster.w / "prom"
    work.mkdir()
    (work / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: cluster\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{cluster.metrics_port}']\n"
    )
    with open(work / "prometheus.log", "wb") as log:
        prom = subprocess.Popen(
            [prometheus, f"--config.file={work / 'prometheus.yml'}",
             f"--storage.tsdb.path={work / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=log,
        )  # fmt: skip

    def query(expr):
        url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                doc = json.load(answer)
        except OSError:
            return []
        return doc["data"]["result"] if doc.get("status") == "success" else []

    try:
        budget = wait_until("a scrape", lambda: query("governor_cluster_budget_watts"), 30)
        caps = {
            (r["metric"]["node"], r["metric"]["gpu"]): float(r["value"][1])
            for r in query("governor_cluster_gpu_cap_watts")
        }
        power = query("governor_cluster_gpu_power_watts")
        allocated = query("governor_cluster_allocated_watts")
    finally:
        prom.terminate()
        prom.wait(20)
    assert float(budget[0]["value"][1]) == BUDGET_W
    # what the fake drivers hold, GPU by GPU
    for node, limits in cluster.limits_w().items():
        for i, watts in enumerate(limits):
            assert caps[(node, f"nvml:{i}")] == pytest.approx(watts, abs=0.01)
    assert float(allocated[0]["value"][1]) == pytest.approx(sum(caps.values()))
    jobs = {r["metric"].get("slurm_job", "") for r in power}
    assert jobs == {"", cluster.compute, cluster.memory}


def test_a_job_that_ends_gives_its_share_back_in_the_round_that_sees_it_end(cluster):
    cluster.run("scancel", cluster.memory)
    wait_until("node2's A100 back at its lowest cap", lambda: a100(cluster, "node2") == 100.0)
    wait_until("node1's A100 given the share", lambda: a100(cluster, "node1") > 370)
    log = cluster.service_log()
    seen = {
        r: f"job {cluster.memory} " in line
        for r, line in (
            (int(m.group(1)), m.group(2))
            for m in re.finditer(r"round ([0-9]+): jobs: ([^\n]*)", log)
        )
    }
    last_with = max(r for r, has in seen.items() if has)
    first_without = min(r for r, has in seen.items() if r > last_with and not has)
    lowered = rounds_of(log, r"node2/nvml:0 cap [0-9.]+ -> 100 W")
    # the first round that no longer sees the job lowers its GPU: one period after Slurm
    # ended it at most, so its share is back within two periods
    assert lowered[-1] == first_without, (seen, lowered)
    # the job's record (the epilog's JSON) has its mean allocated cap and its energy
    path = cluster.nodes["node2"].dir / "jobs" / f"{cluster.memory}.json"
    doc = json.loads(wait_until("the job's record", lambda: path.exists() and path.read_text()))
    caps = re.findall(r"node2/nvml:0 cap [0-9.?]+ -> ([0-9.]+) W", log)
    # the log names a cap when it moves by more than 0.5 W; a renewal that moves it less
    # (the split of the job's last rounds) is in force unlogged
    assert 100.0 < doc["mean_cap_w"] <= max(map(float, caps)) + 0.5, (doc, caps)
    assert doc["gpus"][0]["mean_cap_w"] == doc["mean_cap_w"]
    assert doc["energy_j"] is not None
    assert f"cap_w={doc['mean_cap_w']:.1f}" in doc["admin_comment"]
    within_budget(cluster)


def test_a_controller_restart_recovers_the_caps_from_the_nodes(cluster):
    before = a100(cluster, "node1")
    cluster.stop_service(signal.SIGKILL)
    # the leases run out: node1's A100 falls to the safe share, nothing rises
    wait_until("the lease fallback", lambda: a100(cluster, "node1") == SAFE_SHARE_W, 30)
    assert cluster.limits_w() == {"node1": (SAFE_SHARE_W, 60.0), "node2": (100.0, 60.0)}
    cluster.start_service(BUDGET_W, PERIOD_S, LEASE_S)
    wait_until("the caps back", lambda: a100(cluster, "node1") == before, 60)
    # the new service started from what the nodes hold (its log: "in force 150 W")
    assert re.search(
        r"node1/nvml:0: \S+ \(a100-sxm, 100-400 W\) in force 150", cluster.service_log()
    )
    within_budget(cluster)


def test_a_node_that_stops_answering_keeps_its_caps_and_its_share_is_held(cluster):
    job = cluster.submit(
        "-w", "node2", "--gres=gpu:a100:1", "--comment=compute", "--wrap", "sleep 300"
    )
    wait_until("node2's A100 capped for the job", lambda: a100(cluster, "node2") > 150)
    held = cluster.limits_w()["node2"]
    cluster.nodes["node2"].stop_daemon(signal.SIGKILL)
    cluster.run("scancel", job)
    wait_until(
        "the service to notice",
        lambda: "node2: the daemon does not answer" in cluster.service_log(),
    )
    wait_until("the job gone", lambda: cluster.job_state(job) not in ("RUNNING", "COMPLETING"))
    mark = rounds_done(cluster)
    wait_until("three more rounds", lambda: rounds_done(cluster) >= mark + 3)
    # node2 keeps its caps; node1 is not handed node2's share
    assert cluster.limits_w()["node2"] == held
    assert a100(cluster, "node1") <= BUDGET_W - MIN_CAPS_W[1] - sum(held) + 1e-6
    within_budget(cluster)


def test_a_node_daemon_started_again_after_a_kill_keeps_the_safe_share(cluster):
    held = cluster.limits_w()["node2"]
    assert held[0] > SAFE_SHARE_W  # what the killed daemon left
    # the new daemon takes the GPUs: the dead one's journal would put back 400 W; the lease
    # it kept on disk makes it min(safe share, last cap) instead (the sampler sees no 400)
    cluster.nodes["node2"].start_daemon(cluster.stack.env)
    wait_until(
        "node2 answering again",
        lambda: 'governor_cluster_node_up{node="node2"} 1.0' in cluster.metrics(),
    )
    wait_until("node2's idle GPUs lowered", lambda: cluster.limits_w()["node2"] == MIN_CAPS_W)
    wait_until("node1's A100 given the share", lambda: a100(cluster, "node1") > 370)
    assert "holding the safe share 150 W" in (cluster.nodes["node2"].dir / "daemon.out").read_text()
    within_budget(cluster)


def test_a_killed_slurmd_ends_its_jobs_share(cluster):
    job = cluster.compute  # still running on node1's A100
    assert cluster.job_state(job) == "RUNNING" and a100(cluster, "node1") > 200
    cluster.slurmd["node1"].send_signal(signal.SIGKILL)
    cluster.slurmd["node1"].wait(10)
    # slurmctld marks node1 down after SlurmdTimeout (5 s) and ends its jobs (NODE_FAIL)
    wait_until("node1 down", lambda: cluster.node_states()[0].startswith("down"), 60)
    wait_until("the job ended", lambda: cluster.job_state(job) != "RUNNING")
    wait_until(
        "node1's GPUs at their lowest caps", lambda: cluster.limits_w()["node1"] == MIN_CAPS_W
    )
    within_budget(cluster)


def test_the_caps_are_restored_after_the_jobs(cluster):
    within_budget(cluster)
    cluster.sampler.stop()
    print(
        f"largest sum of the limits: {cluster.sampler.worst_w:g} W in {cluster.sampler.samples} samples"
    )
    cluster.stop_service()
    for node in cluster.nodes.values():
        node.stop_daemon()
    for name, node in cluster.nodes.items():
        for state in node.gpu_states():
            assert state.gpu_locked is None
        assert node.limits_w() == DEFAULT_LIMITS_W, name
