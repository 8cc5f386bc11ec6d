"""Real Slurm and a real Prometheus (Debian's packages) around governor, with GPUs served by
the fake NVML driver under the real nvidia-ml-py. Never a mock: without the programs (or
without root, which slurmd's prolog needs) every test here is skipped, saying what is missing.

One single-node cluster serves the whole module (started in ~3 s, see fleet_services.py):
the GRES are an A100 (index 0) and a T4 (index 1), typed, with ``PrologFlags=Alloc``, and
the prolog/epilog are deploy/slurm/'s, run by slurmd as root. Jobs: sbatch on GPU 0, srun on
GPU 1, sbatch on both, one cancelled with scancel and one stopped by its time limit (the
smallest, 1 minute, is checked every 30 s: it ends 60-90 s after the start, so it is
submitted first and checked last). Energy is read back from the per-job JSON and with sacct;
the fake driver's state shows the clocks restored after each job.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from fakes.nvml import A100, T4, FakeNvml
from fleet_services import (
    DBD_PROGRAMS,
    REPO,
    SLURM_PROGRAMS,
    free_port,
    missing,
    start_slurm,
    wait_for,
    which,
)

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="real Slurm needs root (slurmd runs the prolog as root); run the suite as root",
)


@pytest.fixture(scope="module")
def fake(fake_nvml_lib, tmp_path_factory):
    """The fake driver shared by slurmd's scripts and this test (two GPUs)."""
    mp = pytest.MonkeyPatch()
    driver = FakeNvml(fake_nvml_lib, tmp_path_factory.mktemp("real-nvml"), mp)
    yield driver
    driver.close()
    mp.undo()


@pytest.fixture(scope="module")
def cluster(fake, tmp_path_factory):
    gone = missing(SLURM_PROGRAMS)
    if gone:
        pytest.skip(
            "real Slurm is not installed (missing "
            + ", ".join(gone)
            + "): apt-get install slurmctld slurmd slurm-client munge"
        )
    accounting = not missing(DBD_PROGRAMS)
    # munged wants every directory above its socket searchable by all: not pytest's tmp
    work = Path(tempfile.mkdtemp(prefix="governor-slurm-"))
    stack = start_slurm(work, fake.env(), accounting)
    stack.accounting = accounting
    stack.jobs = work / "jobs"
    # The time-limit job goes first: it needs 60-90 s, which the other tests use.
    stack.time_limited = submit(stack, "-t", "1", "--gres=gpu:t4:1", "--wrap", "sleep 300")
    try:
        yield stack
    finally:
        stack.stop()
        if not os.environ.get("GOVERNOR_KEEP_TEST_DIRS"):  # set it to read the daemons' logs
            shutil.rmtree(work, ignore_errors=True)


def submit(stack, *args) -> str:
    out = stack.run("sbatch", "--parsable", "-o", "/dev/null", *args)
    return out.strip().split(";")[0]


def state_of(stack, job) -> str:
    out = stack.run("scontrol", "show", "job", job, check=False)
    for word in out.split():
        if word.startswith("JobState="):
            return word.split("=", 1)[1]
    return ""


def final_state(stack, job) -> str:
    """The job's state once the epilog has returned (COMPLETING until then)."""
    return wait_for(
        f"job {job} done",
        lambda: (lambda st: st if st and st not in ("RUNNING", "COMPLETING") else "")(
            state_of(stack, job)
        ),
        30,
        0.25,
    )


def record(stack, job, timeout_s=60):
    """The per-job JSON the epilog wrote (it is written last: the epilog has finished)."""
    path = stack.jobs / f"{job}.json"
    wait_for(f"record of job {job}", path.exists, timeout_s, 0.25)
    return json.loads(path.read_text())


def sacct_comment(stack, job) -> str:
    def look():
        out = stack.run(
            "sacct", "-X", "-n", "-P", "-j", job, "-o", "JobID,State,AdminComment%400", check=False
        )
        line = out.strip().splitlines()[0] if out.strip() else ""
        return line if "governor:" in line else ""

    return wait_for(f"sacct AdminComment of job {job}", look, 20, 0.5)


def clocks(fake):
    return [fake.gpu(i).gpu_locked for i in (0, 1)]


def check_restored(fake):
    assert clocks(fake) == [None, None], "a GPU was left locked after its job"


@pytest.fixture
def kept_dir():
    """A private directory, kept when GOVERNOR_KEEP_TEST_DIRS is set (to read the logs)."""
    path = Path(tempfile.mkdtemp(prefix="governor-prometheus-"))
    yield path
    if not os.environ.get("GOVERNOR_KEEP_TEST_DIRS"):
        shutil.rmtree(path, ignore_errors=True)


def test_prometheus_scrapes_governor_exporter(fake, kept_dir):
    prometheus = which("prometheus")
    if prometheus is None:
        pytest.skip("prometheus is not installed: apt-get install prometheus")
    pytest.importorskip("prometheus_client", reason="pip install 'gpu-governor[metrics]'")
    tmp_path = kept_dir
    exporter_port, prom_port = free_port(), free_port()
    env = fake.env(dict(os.environ, PYTHONPATH=str(REPO)))
    exporter = subprocess.Popen(
        [sys.executable, "-m", "governor", "exporter", "--listen", f"127.0.0.1:{exporter_port}"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: governor\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{exporter_port}']\n"
    )
    prom = subprocess.Popen(
        [
            prometheus,
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'prom-data'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "prometheus.log", "wb"),
    )
    try:

        def query(expr):
            url = f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode(
                {"query": expr}
            )
            try:
                with urllib.request.urlopen(url, timeout=2) as answer:
                    doc = json.load(answer)
            except OSError:
                return []
            return doc["data"]["result"] if doc.get("status") == "success" else []

        import urllib.parse

        power = wait_for("a scrape in prometheus", lambda: query("governor_power_watts"), 30, 0.5)
        by_uuid = {r["metric"]["uuid"]: r for r in power}
        assert set(by_uuid) == {A100["uuid"], T4["uuid"]}
        assert by_uuid[T4["uuid"]]["metric"]["board"] == "t4"
        assert by_uuid[T4["uuid"]]["metric"]["scope"] == "gpu"
        assert float(by_uuid[T4["uuid"]]["value"][1]) == pytest.approx(27.0)
        for name in (
            "governor_energy_joules_total",
            "governor_clock_hertz",
            "governor_temperature_celsius",
            "governor_policy_info",
        ):
            found = query(name)
            assert {r["metric"]["uuid"] for r in found} == {A100["uuid"], T4["uuid"]}, name
        hz = {r["metric"]["domain"] for r in query("governor_clock_hertz")}
        assert hz == {"graphics", "memory"}
        (tmp_path / "query.json").write_text(json.dumps(power, indent=1))
        sample = urllib.request.urlopen(
            f"http://127.0.0.1:{exporter_port}/metrics", timeout=5
        ).read()
        (tmp_path / "scrape.txt").write_bytes(sample)
    finally:
        for proc in (prom, exporter):
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
    assert exporter.returncode == 0, exporter.stderr.read()


def test_sbatch_on_gpu_0_locks_it_during_the_job_and_records_its_energy(cluster, fake):
    job = submit(cluster, "--gres=gpu:a100:1", "--wrap", "sleep 4")
    wait_for("job running", lambda: state_of(cluster, job) == "RUNNING", 30)
    locked = wait_for("GPU 0 locked", lambda: fake.gpu(0).gpu_locked, 10)
    assert locked[0] == locked[1]
    doc = record(cluster, job)
    assert doc["prolog_record"] and doc["gpus"][0]["uuid"] == A100["uuid"]
    assert doc["gpus"][0]["clocks_mhz"] == [locked[0], locked[1]]
    gpu = doc["gpus"][0]
    assert gpu["energy_j"] > 0 and 55 < gpu["avg_power_w"] < 80  # the fake A100 draws 67 W
    assert fake.gpu(0).gpu_locked is None
    if cluster.accounting:
        line = sacct_comment(cluster, job)
        assert A100["uuid"].lower() in line and f"@{locked[0]:g}mhz" in line
        (cluster.w / "sacct-sample.txt").write_text(line + "\n")


def test_scancel_restores_the_gpu(cluster, fake):
    job = submit(cluster, "--gres=gpu:a100:1", "--wrap", "sleep 300")
    wait_for("job running", lambda: state_of(cluster, job) == "RUNNING", 30)
    wait_for("GPU 0 locked", lambda: fake.gpu(0).gpu_locked, 10)
    cluster.run("scancel", job)
    doc = record(cluster, job)
    assert doc["gpus"][0]["energy_j"] > 0
    assert fake.gpu(0).gpu_locked is None
    assert final_state(cluster, job).startswith("CANCELLED")


def test_a_job_that_opts_out_keeps_driver_clocks_and_still_gets_its_energy(cluster, fake):
    writes = fake.gpu(0).writes
    job = submit(cluster, "--comment=governor=off", "--gres=gpu:a100:1", "--wrap", "sleep 2")
    doc = record(cluster, job)
    assert fake.gpu(0).writes == writes  # the driver was never asked to change anything
    assert doc["policy"] == "none" and "opted out" in doc["policy_reason"]
    (gpu,) = doc["gpus"]
    assert gpu["clocks_mhz"] is None and gpu["energy_j"] > 0
    assert fake.gpu(0).gpu_locked is None


def test_a_job_that_hits_its_time_limit_is_restored(cluster, fake):
    job = cluster.time_limited
    doc = record(cluster, job, timeout_s=150)
    assert final_state(cluster, job) == "TIMEOUT"
    (gpu,) = doc["gpus"]
    assert gpu["uuid"] == T4["uuid"] and gpu["clocks_mhz"]
    assert 55 <= doc["duration_s"] <= 120 and gpu["energy_j"] > 27 * 55
    assert fake.gpu(1).gpu_locked is None


def test_srun_on_gpu_1(cluster, fake):
    out = cluster.run(
        "srun",
        "--gres=gpu:t4:1",
        "sh",
        "-c",
        "echo $SLURM_JOB_ID $CUDA_VISIBLE_DEVICES",
        timeout_s=60,
    )
    job, visible = out.strip().splitlines()[-1].split()
    assert visible == "1"  # NVML's GPU 1, and /dev/nvidia1: not renumbered
    doc = record(cluster, job)
    assert [g["uuid"] for g in doc["gpus"]] == [T4["uuid"]]
    assert doc["gpus"][0]["energy_j"] > 0
    check_restored(fake)


def test_both_gpus_of_two_types_in_one_job(cluster, fake):
    # Slurm 22.05 puts only GPU 1 in the prolog's variables for this request: scontrol -d
    # gives the other one
    job = submit(cluster, "--gres=gpu:a100:1,gpu:t4:1", "--wrap", "sleep 3")
    wait_for("job running", lambda: state_of(cluster, job) == "RUNNING", 60)
    wait_for("both GPUs locked", lambda: all(clocks(fake)), 10)
    doc = record(cluster, job)
    assert [g["uuid"] for g in doc["gpus"]] == [A100["uuid"], T4["uuid"]]
    assert doc["energy_j"] == pytest.approx(sum(g["energy_j"] for g in doc["gpus"]), abs=0.01)
    check_restored(fake)
    if cluster.accounting:
        line = sacct_comment(cluster, job)
        assert A100["uuid"].lower() in line and T4["uuid"].lower() in line
    # nothing drained the node on the way
    assert "drain" not in cluster.run("sinfo", "-h", "-o", "%T")
