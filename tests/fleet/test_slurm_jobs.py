"""The Slurm prolog and epilog (``governor slurm prolog|epilog``) as slurmd runs them: as
separate processes with only the job's variables, over the fake NVML driver (the real
nvidia-ml-py above it). tests/fleet/test_real_services.py runs them under a real slurmd."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import run_cli
from fakes.nvml import A100, T4, Gpu

from governor.errors import InvalidRequestError
from governor.fleet.slurm import (
    admin_comment,
    expand_hostlist,
    gres_gpu_files,
    job_gpu_indices,
    parse_admin_comment,
    parse_gpu_list,
    scontrol_gpu_indices,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def job(fake_nvml, tmp_path):
    """Run the prolog or epilog of a job the way slurmd does: a cleared environment plus the
    job's variables, plus what the fake driver needs."""
    empty = tmp_path / "no-slurm-bin"
    empty.mkdir()
    records = tmp_path / "jobs"

    def run(mode, job_id, **variables):
        env = {
            "PYTHONPATH": str(REPO),
            "LD_LIBRARY_PATH": fake_nvml.env()["LD_LIBRARY_PATH"],
            "FAKE_NVML_CONFIG": str(fake_nvml.config_path),
            "FAKE_NVML_STATE": str(fake_nvml.state_path),
            "GOVERNOR_STATE_DIR": os.environ["GOVERNOR_STATE_DIR"],
            "GOVERNOR_DATA_DIR": os.environ["GOVERNOR_DATA_DIR"],
            "GOVERNOR_RECORD_DIR": str(records),
            "GOVERNOR_SLURM_CONF": str(tmp_path / "governor-slurm.conf"),
            "GOVERNOR_SLURM_BIN": str(empty),  # no scontrol/sacctmgr: unit tests
            "GOVERNOR_GRES_CONF": str(tmp_path / "gres.conf"),  # absent unless a test writes it
            "GOVERNOR_SYSLOG": "0",
            "SLURM_JOB_ID": str(job_id),
            "SLURM_SCRIPT_CONTEXT": f"{mode}_slurmd",
        }
        env.update({k: str(v) for k, v in variables.items()})
        proc = subprocess.run(
            [sys.executable, "-m", "governor", "slurm", mode],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return proc

    def record(job_id):
        return json.loads((records / f"{job_id}.json").read_text())

    run.record = record
    run.gres_conf = tmp_path / "gres.conf"
    run.records = records
    run.fake = fake_nvml
    return run


def test_a_job_on_gpu_1_gets_its_ppw_clock_and_its_energy_recorded(job):
    out = job("prolog", 11, SLURM_JOB_GPUS="1", CUDA_VISIBLE_DEVICES="1")
    assert out.returncode == 0, out.stderr
    assert job.fake.gpu(0).gpu_locked is None  # GPU 0 is not the job's
    locked = job.fake.gpu(1).gpu_locked
    assert locked is not None and locked[0] == locked[1]
    running = json.loads((job.records / "running" / "11.json").read_text())
    assert running["gpus"][0]["uuid"] == T4["uuid"]
    out = job("epilog", 11, SLURM_JOB_GPUS="1", CUDA_VISIBLE_DEVICES="1")
    assert out.returncode == 0, out.stderr
    assert job.fake.gpu(1).gpu_locked is None  # restored
    doc = job.record(11)
    assert doc["prolog_record"] is True
    (gpu,) = doc["gpus"]
    assert gpu["uuid"] == T4["uuid"] and gpu["clocks_mhz"] == [locked[0], locked[1]]
    assert gpu["energy_j"] > 0 and 20 < gpu["avg_power_w"] < 35  # the fake T4 draws 27 W
    assert doc["energy_j"] == gpu["energy_j"]
    assert not (job.records / "running" / "11.json").exists()
    assert "record" in (job.records / "slurm.log").read_text()


def test_a_ppw_clock_guessed_without_a_profile_is_said_with_the_command_that_calibrates(job):
    out = job("prolog", 12, SLURM_JOB_GPUS="0", CUDA_VISIBLE_DEVICES="0")
    assert out.returncode == 0, out.stderr
    assert job.fake.gpu(0).gpu_locked is not None  # the guess is applied, and said
    running = json.loads((job.records / "running" / "12.json").read_text())
    (note,) = [n for n in running["gpus"][0]["notes"] if "guessed" in n]
    assert f"governor calibrate --device {running['gpus'][0]['uri']}'" in note
    assert note in (job.records / "slurm.log").read_text()


def test_both_gpus_and_the_total(job):
    assert job("prolog", 12, SLURM_JOB_GPUS="0-1").returncode == 0
    assert job.fake.gpu(0).gpu_locked and job.fake.gpu(1).gpu_locked
    assert job("epilog", 12, SLURM_JOB_GPUS="0-1").returncode == 0
    doc = job.record(12)
    assert [g["uuid"] for g in doc["gpus"]] == [A100["uuid"], T4["uuid"]]
    assert doc["energy_j"] == pytest.approx(sum(g["energy_j"] for g in doc["gpus"]), abs=0.01)
    assert job.fake.gpu(0).gpu_locked is None and job.fake.gpu(1).gpu_locked is None


def test_gres_indices_are_minor_numbers_not_nvml_indices(job):
    # /dev/nvidia0 is NVML's GPU 1 here: Slurm's GPU 0 must be the T4
    job.fake.configure(Gpu(minor=1), Gpu(minor=0))
    assert job("prolog", 13, SLURM_JOB_GPUS="0").returncode == 0
    assert job.fake.gpu(0).gpu_locked is None
    assert job.fake.gpu(1).gpu_locked is not None
    assert job("epilog", 13).returncode == 0  # no GPU variables: the record is enough
    assert job.record(13)["gpus"][0]["uuid"] == T4["uuid"]
    assert job.fake.gpu(1).gpu_locked is None


@pytest.mark.parametrize(
    "gres_conf",
    [
        "Name=gpu File=/dev/nvidia[1,0]\n",
        "# two lines, the T4 first\nNodeName=node1 Name=gpu Type=t4 File=/dev/nvidia1\n"
        "NodeName=node1 Name=gpu Type=a100 File=/dev/nvidia0\n"
        "NodeName=node2 Name=gpu File=/dev/nvidia[0-7]\n",
    ],
)
def test_gres_index_follows_the_order_of_the_device_files_in_gres_conf(job, gres_conf):
    """slurmd numbers GRES devices in gres.conf order (22.05.8 logs /dev/nvidia1 first for
    File=/dev/nvidia[1,0] and gives the first job index 0): GRES 0 is /dev/nvidia1 here, the
    T4 (minor 1), not the A100 (minor 0)."""
    job.gres_conf.write_text(gres_conf)
    out = job("prolog", 16, SLURM_JOB_GPUS="0", SLURMD_NODENAME="node1")
    assert out.returncode == 0, out.stderr
    assert job.fake.gpu(0).gpu_locked is None
    assert job.fake.gpu(1).gpu_locked is not None
    running = json.loads((job.records / "running" / "16.json").read_text())
    assert [(g["gres_index"], g["minor"], g["uuid"]) for g in running["gpus"]] == [
        (0, 1, T4["uuid"])
    ]
    assert "GRES order from" in (job.records / "slurm.log").read_text()
    assert job("epilog", 16).returncode == 0
    assert job.fake.gpu(1).gpu_locked is None


def test_a_gres_index_beyond_the_files_of_gres_conf_is_reported_not_guessed(job):
    job.gres_conf.write_text("Name=gpu File=/dev/nvidia1\n")
    out = job("prolog", 17, SLURM_JOB_GPUS="0-1", GOVERNOR_STRICT="1")
    assert out.returncode == 1  # strict: the unmatched GPU fails the prolog
    assert "beyond the 1 GPU files gres.conf lists" in (job.records / "slurm.log").read_text()
    assert job.fake.gpu(1).gpu_locked is not None and job.fake.gpu(0).gpu_locked is None
    assert job("epilog", 17).returncode == 0


def test_an_empty_gres_field_in_scontrol_output_is_no_index_and_no_crash():
    """slurmd 22.05 with an untyped GPU printed a job line ending in ``GRES=`` (seen in
    test_real_gres_order.py); the prolog crashed on it with an IndexError."""
    text = (
        "JobId=1 JobName=wrap\n"
        "   Nodes=node1 CPU_IDs=0 Mem=0 GRES=\n"
        "   Nodes=node1 CPU_IDs=1 Mem=0 GRES=gpu:1(IDX:1)\n"
    )
    assert scontrol_gpu_indices(text) == [1]
    assert scontrol_gpu_indices("   Nodes=node1 CPU_IDs=0 Mem=0 GRES=\n") == []


def test_expand_hostlist_keeps_the_written_order():
    assert expand_hostlist("/dev/nvidia[1,0,2-3]") == [
        "/dev/nvidia1",
        "/dev/nvidia0",
        "/dev/nvidia2",
        "/dev/nvidia3",
    ]
    assert expand_hostlist("gpu[08-10]") == ["gpu08", "gpu09", "gpu10"]
    assert expand_hostlist("node[2,1],login") == ["node2", "node1", "login"]
    with pytest.raises(InvalidRequestError):
        expand_hostlist("/dev/nvidia[1-0]")
    with pytest.raises(InvalidRequestError):
        expand_hostlist("/dev/nvidia[1")


def test_gres_gpu_files_for_one_node_and_with_autodetect():
    text = (
        "NodeName=n[1-2] Name=gpu File=/dev/nvidia[3,2]\n"
        "NodeName=n3 Name=gpu File=/dev/nvidia0\n"
        "Name=mps Count=100 File=/dev/nvidia2\n"
        "Name=gpu File=/dev/nvidia9   # every node\n"
    )
    assert gres_gpu_files(text, "n2") == ["/dev/nvidia3", "/dev/nvidia2", "/dev/nvidia9"]
    assert gres_gpu_files(text, "n3") == ["/dev/nvidia0", "/dev/nvidia9"]
    # with AutoDetect slurmd merges and sorts the records by file
    assert gres_gpu_files("AutoDetect=nvml\n" + text, "n1") == [
        "/dev/nvidia2",
        "/dev/nvidia3",
        "/dev/nvidia9",
    ]


def test_without_minor_numbers_the_index_is_nvml_index(job):
    job.fake.configure(not_supported=["nvmlDeviceGetMinorNumber"])
    assert job("prolog", 14, CUDA_VISIBLE_DEVICES="1").returncode == 0
    assert job.fake.gpu(1).gpu_locked is not None
    running = json.loads((job.records / "running" / "14.json").read_text())
    assert running["gpus"][0]["matched_by"] == "index"
    assert job("epilog", 14).returncode == 0
    assert job.fake.gpu(1).gpu_locked is None


def test_an_epilog_without_a_prolog_still_writes_the_record(job):
    out = job("epilog", 15, SLURM_JOB_GPUS="0")
    assert out.returncode == 0, out.stderr
    doc = job.record(15)
    assert doc["prolog_record"] is False and doc["energy_j"] is None
    assert "no prolog record" in doc["note"]
    assert doc["gpus"][0]["uuid"] == A100["uuid"]


def test_a_site_apply_below_the_job_stays_after_it(job):
    # A power limit, which NVML reads back. (NVML cannot report locked clocks, so a layer
    # over another process's clock lock journals "unlocked": see docs/deploy.md.)
    env = job.fake.env()

    def governor(*args):
        out = subprocess.run(
            [sys.executable, "-m", "governor", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr

    governor("apply", "--power-limit", "300", "--device", "nvml:0")
    assert job.fake.gpu(0).power_limit_mw == 300000
    conf = Path(job.records).parent / "governor-slurm.conf"
    conf.write_text("GOVERNOR_POLICY=power-limit=250\n")
    assert job("prolog", 16, SLURM_JOB_GPUS="0").returncode == 0
    assert job.fake.gpu(0).power_limit_mw == 250000
    assert job("epilog", 16, SLURM_JOB_GPUS="0").returncode == 0
    assert job.fake.gpu(0).power_limit_mw == 300000  # the site's limit, not the default
    assert job.record(16)["gpus"][0]["power_limit_w"] == 250.0
    governor("reset", "--device", "nvml:0")
    assert job.fake.gpu(0).power_limit_mw == 400000


def test_partitions_and_jobs_opt_out_and_energy_is_still_recorded(job):
    conf = Path(job.records).parent / "governor-slurm.conf"
    conf.write_text("GOVERNOR_SKIP_PARTITIONS=interactive,debug\n")
    assert job("prolog", 17, SLURM_JOB_GPUS="0", SLURM_JOB_PARTITION="debug").returncode == 0
    assert job.fake.gpu(0).gpu_locked is None
    assert job("epilog", 17, SLURM_JOB_GPUS="0").returncode == 0
    doc = job.record(17)
    assert doc["policy"] == "none" and "debug" in doc["policy_reason"]
    assert doc["gpus"][0]["energy_j"] > 0 and doc["gpus"][0]["clocks_mhz"] is None


def test_a_failure_is_one_logged_line_and_fails_the_prolog_only_when_strict(job):
    job.fake.configure(unprivileged=True)
    out = job("prolog", 18, SLURM_JOB_GPUS="0")
    assert out.returncode == 0
    assert "no permission" in out.stderr and "Traceback" not in out.stderr
    out = job("prolog", 19, SLURM_JOB_GPUS="0", GOVERNOR_STRICT="1")
    assert out.returncode == 1
    log = (job.records / "slurm.log").read_text()
    assert "prolog job 19]: error:" in log
    out = job("prolog", 20, SLURM_JOB_GPUS="0", GOVERNOR_POLICY="fast")
    assert out.returncode == 0 and "GOVERNOR_POLICY must be" in out.stderr
    for n in (18, 19):
        assert job("epilog", n).returncode == 0


def test_a_gpu_not_on_the_node_is_reported_not_guessed(job):
    out = job("prolog", 21, SLURM_JOB_GPUS="5", GOVERNOR_STRICT="1")
    assert out.returncode == 1 and "GPU 5 of the job is not on this node" in out.stderr


def test_gpu_lists_and_scontrol_indices():
    assert parse_gpu_list("0,2-3,GPU-5f1c,,x;reboot") == ([0, 2, 3], ["GPU-5f1c", "x;reboot"])
    text = (
        "JobId=5 JobName=x\n   Comment=governor=off Partition=debug\n"
        "     Nodes=node1 CPU_IDs=0-1 Mem=0 GRES=gpu:a100:1(IDX:0),gpu:h100:1(IDX:1)\n"
    )
    assert scontrol_gpu_indices(text) == [0, 1]
    # typed node, --gres=gpu:a100:1,gpu:h100:1: Slurm 22.05 puts only 1 in the variables
    assert job_gpu_indices({"SLURM_JOB_GPUS": "1"}, text) == ([0, 1], "SLURM_JOB_GPUS+scontrol", [])
    two = text + "     Nodes=node2 CPU_IDs=0 Mem=0 GRES=gpu:2(IDX:2-3)\n"
    assert scontrol_gpu_indices(two, "node2") == [2, 3]


def test_the_admin_comment_survives_sacctmgr():
    doc = {
        "energy_j": 1650.12,
        "policy": "ppw",
        "gpus": [
            {"uuid": A100["uuid"], "energy_j": 1200.0, "clocks_mhz": [1050.0, 1050.0]},
            {"uuid": T4["uuid"], "energy_j": 450.12, "clocks_mhz": None},
        ],
    }
    text = admin_comment(doc)
    assert text == text.lower() and not set(text) & set(" ,'\"")
    # sacctmgr lowercases the value and turns quotes into backticks
    back = parse_admin_comment(text.lower().replace('"', "`"))
    assert back["energy_j"] == 1650.1 and back["policy"] == "ppw"
    assert back["gpus"][A100["uuid"].lower()] == {"energy_j": 1200.0, "clock_mhz": 1050.0}
    assert back["gpus"][T4["uuid"].lower()]["clock_mhz"] is None
    assert parse_admin_comment("something else") is None


@pytest.mark.skipif(os.geteuid() != 0, reason="NVML clock locks need root (the daemon's)")
def test_through_the_nodes_daemon_when_it_holds_the_gpus(job, tmp_path):
    import tempfile

    from governor.runtime.daemon.config import parse_config
    from governor.runtime.daemon.server import DaemonServer

    sockdir = Path(tempfile.mkdtemp(prefix="gvj-"))
    sock = sockdir / "g.sock"
    cfg = parse_config(
        f'[daemon]\nsocket = "{sock}"\n[policy]\npolicy = "none"\n[[device]]\nuri = "all"\n',
        "site.toml",
    )
    server = DaemonServer(cfg).start_in_thread()
    try:
        via = {"GOVERNOR_VIA": "daemon", "GOVERNOR_DAEMON_SOCKET": str(sock)}
        out = job("prolog", 31, SLURM_JOB_GPUS="1", GOVERNOR_POLICY="max", **via)
        assert out.returncode == 0, out.stderr
        assert job.fake.gpu(1).gpu_locked == (1590, 1590) and job.fake.gpu(0).gpu_locked is None
        out = job("epilog", 31, **via)
        assert out.returncode == 0, out.stderr
        assert job.fake.gpu(1).gpu_locked is None
        (gpu,) = job.record(31)["gpus"]
        assert gpu["clocks_mhz"] == [1590.0, 1590.0] and gpu["energy_j"] > 0
        # directly, the prolog finds the GPUs taken by the daemon: logged, and only strict fails
        out = job("prolog", 32, SLURM_JOB_GPUS="0", GOVERNOR_STRICT="1")
        assert out.returncode == 1 and "daemon" in out.stderr
    finally:
        server.stop()


def test_a_job_without_gpus_gets_a_record_that_says_so(job):
    assert job("prolog", 41).returncode == 0
    assert job("epilog", 41).returncode == 0
    doc = job.record(41)
    assert doc["gpus"] == [] and doc["note"] == "no GPU allocated to this job"
    assert doc["admin_comment"] is None


def test_who_is_governed_by_partition_and_by_the_jobs_comment():
    from governor.fleet.slurm import _decide, _job_comment, load_settings

    base = {"GOVERNOR_SLURM_CONF": "/nonexistent", "GOVERNOR_STATE_DIR": "/tmp/x"}
    site = load_settings(dict(base, GOVERNOR_PARTITIONS="gpu,batch"))
    assert _decide(site, "gpu", "")[0] == "ppw"
    assert _decide(site, "debug", "")[0] == "none"
    assert _decide(site, "debug", "please governor=on")[0] == "ppw"  # opted in
    assert _decide(site, "gpu", "GOVERNOR=OFF for this run")[0] == "none"  # opted out
    strict = load_settings(dict(base, GOVERNOR_PARTITIONS="gpu", GOVERNOR_JOB_CHOICE="0"))
    assert _decide(strict, "gpu", "governor=off")[0] == "ppw"  # the site decides alone
    text = (
        "JobId=9 JobName=wrap\n   Comment=my run governor=off AdminComment=x\n"
        "   AdminComment=governor:energy_j=1.0\n"
    )
    assert "governor=off" in _job_comment(text)
    assert _job_comment("   AdminComment=governor:energy_j=1.0\n") == ""


def _t4_profile_with_pair(capsys, core_mhz: float, mem_mhz: float) -> float:
    """The T4's profile (calibrated on its simulated twin, with the fake T4's fingerprint) with
    the (core, memory) pair ``governor calibrate`` keeps on a board with a memory axis;
    returns the core calibration's PPW clock."""
    import governor
    from governor.paths import data_dir
    from governor.profiles.profile import fingerprint

    code, out, err = run_cli(capsys, "calibrate", "--device", "sim:t4", "--json")
    assert code == 0, err
    doc = json.loads(out)
    path = data_dir() / "profiles" / "t4.json"
    profile = json.loads(path.read_text())
    with governor.open_device("nvml:1") as dev:
        profile["fingerprint"] = fingerprint(dev)
    pair = {"clock_mhz": core_mhz, "mem_clock_mhz": mem_mhz}
    profile.setdefault("tuning", {})["ppw-pair"] = {doc["load"]["name"]: pair}
    path.write_text(json.dumps(profile))
    return float(doc["ppw_optimal_clock_mhz"])


def test_the_ppw_pair_is_set_by_the_prolog_and_the_epilog_restores_both(job, capsys):
    _t4_profile_with_pair(capsys, 585.0, 405.0)
    # a site's lock below the job's layer: the epilog puts it back, not the driver's default
    site = subprocess.run(
        [sys.executable, "-m", "governor", "apply", "--device", "nvml:1", "--mem-clock", "5001"],
        env=dict(job.fake.env(), PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert site.returncode == 0, site.stderr
    assert job.fake.gpu(1).mem_locked == (5001, 5001)
    out = job("prolog", 21, SLURM_JOB_GPUS="1", CUDA_VISIBLE_DEVICES="1")
    assert out.returncode == 0, out.stderr
    assert job.fake.gpu(1).gpu_locked == (585, 585) and job.fake.gpu(1).mem_locked == (405, 405)
    running = json.loads((job.records / "running" / "21.json").read_text())
    assert running["gpus"][0]["mem_clock_mhz"] == 405.0
    out = job("epilog", 21, SLURM_JOB_GPUS="1", CUDA_VISIBLE_DEVICES="1")
    assert out.returncode == 0, out.stderr
    assert job.fake.gpu(1).gpu_locked is None  # the job's core clock undone
    assert job.fake.gpu(1).mem_locked == (5001, 5001)  # the site's lock, kept


def test_without_a_pair_the_prolog_sets_the_core_clock_alone(job, capsys):
    core = _t4_profile_with_pair(capsys, 585.0, 405.0)
    from governor.paths import data_dir

    path = data_dir() / "profiles" / "t4.json"
    profile = json.loads(path.read_text())
    del profile["tuning"]["ppw-pair"]
    path.write_text(json.dumps(profile))
    out = job("prolog", 22, SLURM_JOB_GPUS="1", CUDA_VISIBLE_DEVICES="1")
    assert out.returncode == 0, out.stderr
    assert job.fake.gpu(1).gpu_locked == (int(core), int(core))
    assert job.fake.gpu(1).mem_locked is None
    assert job("epilog", 22, SLURM_JOB_GPUS="1").returncode == 0
    assert job.fake.gpu(1).gpu_locked is None and job.fake.gpu(1).mem_locked is None
