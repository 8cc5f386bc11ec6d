"""The commands over a wedged driver (the fake NVML library blocks every call on a GPU while
its hang file exists), each a real ``governor`` process over the real nvidia-ml-py: ``run``
returns the job's own exit code and says the GPU stopped answering, ``reset`` says "not
responding" instead of hanging and restores once the GPU answers, ``monitor --device all`` and
the exporter keep serving the other GPU. Deadlines are 0.5 s (``GOVERNOR_DEVICE_DEADLINES``);
the timeouts below are generous outer bounds, never assertions on elapsed time."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from governor.paths import state_dir

A100_TOP_MHZ = 1410
OUTER_S = 120  # "returns within job time + 30 s" with room for a busy machine


@pytest.fixture
def nvml(fake_nvml):
    yield fake_nvml
    for index in range(2):
        fake_nvml.unhang(index)


def env_of(nvml):
    return dict(nvml.env(), GOVERNOR_DEVICE_DEADLINES="read=0.5,write=0.5,open=0.5,close=0.5")


def governor_cli(nvml, *args):
    return subprocess.run(
        [sys.executable, "-c", ROOT_LAUNCH, *args],
        env=env_of(nvml),
        capture_output=True,
        text=True,
        timeout=OUTER_S,
    )


# ``governor`` as root would run it: the backend's root check is the one thing patched
ROOT_LAUNCH = (
    "import sys, runpy\n"
    "import governor.devices.nvml as backend\n"
    "backend._is_root = lambda: True\n"
    "sys.argv = ['governor'] + sys.argv[1:]\n"
    "runpy.run_module('governor', run_name='__main__')\n"
)


def journals():
    directory = state_dir()
    if not directory.exists():
        return []
    return [json.loads(p.read_text()) for p in sorted(directory.glob("journal-*.json"))]


def test_run_returns_the_jobs_code_when_the_gpu_wedges_and_reset_restores_it_later(nvml):
    job = (
        f"import sys, time; open({str(nvml.hang_path(0))!r}, 'w').write('hang')\n"
        "time.sleep(1.5); sys.exit(3)"
    )
    done = governor_cli(
        nvml, "run", "--device", "nvml:0", "--policy", "max", "--interval-s", "0.05",
        "--", sys.executable, "-c", job,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert "nvml:0: not responding: the driver stopped answering" in done.stderr
    assert done.stderr.count("governor stopped changing it") == 1, done.stderr
    assert "could not restore gpu_clocks" in done.stderr
    # the driver still holds the run's clock; the journal keeps what to put back
    assert nvml.gpu(0).gpu_locked == (A100_TOP_MHZ, A100_TOP_MHZ)
    (journal,) = journals()
    assert journal["layers"][-1]["original"] == {"gpu_clocks": None}
    # reset while it is still wedged: one line, not a hang, and the journal stays
    still = governor_cli(nvml, "reset", "--device", "nvml:0")
    assert still.returncode != 0
    assert "not responding" in still.stderr and "Traceback" not in still.stderr
    assert len(journals()) == 1
    nvml.unhang(0)
    back = governor_cli(nvml, "reset", "--device", "nvml:0")
    assert back.returncode == 0, back.stderr
    assert nvml.gpu(0).gpu_locked is None and journals() == []


def test_reset_of_every_journaled_device_says_which_one_does_not_answer(nvml):
    set_clock = governor_cli(nvml, "apply", "--device", "nvml:0", "max")
    assert set_clock.returncode == 0, set_clock.stderr
    assert nvml.gpu(0).gpu_locked == (A100_TOP_MHZ, A100_TOP_MHZ)
    nvml.hang(0)
    still = governor_cli(nvml, "reset", "--all")
    assert still.returncode != 0 and "not responding" in still.stderr, still.stderr
    nvml.unhang(0)
    back = governor_cli(nvml, "reset", "--all")
    assert back.returncode == 0, back.stderr
    assert nvml.gpu(0).gpu_locked is None and journals() == []


def test_monitor_all_serves_the_other_gpu_while_one_is_wedged(nvml):
    proc = subprocess.Popen(
        [sys.executable, "-m", "governor", "monitor", "--device", "all", "--count", "400",
         "--interval-s", "0.05", "--json"],
        env=env_of(nvml), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    seen = []
    wedged = back = False
    for line in proc.stdout:
        seen.append(json.loads(line)["device"])
        if len(seen) == 4 and not wedged:
            nvml.hang(0)
            wedged = True
            mark = len(seen)
        if wedged and not back and seen[-6:] == ["nvml:1"] * 6:
            nvml.unhang(0)
            back = True
            mark = len(seen)
        if back and "nvml:0" in seen[mark:]:
            break
    proc.terminate()
    _, err = proc.communicate(timeout=OUTER_S)
    assert wedged and back and "nvml:0" in seen[mark:], err
    said = [line for line in err.splitlines() if "not responding" in line]
    assert len(said) == 1 and said[0].startswith("governor: nvml:0: not responding"), err
    assert "governor: nvml:0 answers again" in err


def test_the_exporter_serves_the_other_gpu_while_one_is_wedged(nvml):
    pytest.importorskip("prometheus_client", reason="pip install 'gpu-governor[metrics]'")
    import os
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    def scrape(url):
        text = urllib.request.urlopen(url, timeout=OUTER_S).read().decode()
        up, clocked = {}, set()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "governor_device_up":
                    up[sample.labels["device"]] = sample.value
                if sample.name == "governor_clock_hertz":
                    clocked.add(sample.labels["device"])
        return up, clocked

    env = dict(env_of(nvml), PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen(
        [sys.executable, "-m", "governor", "exporter", "--listen", "127.0.0.1:0", "--json"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        url = json.loads(proc.stdout.readline())["url"]
        assert scrape(url) == ({"nvml:0": 1.0, "nvml:1": 1.0}, {"nvml:0", "nvml:1"})
        nvml.hang(0)
        for _ in range(2):
            assert scrape(url) == ({"nvml:0": 0.0, "nvml:1": 1.0}, {"nvml:1"})
        nvml.unhang(0)
        end = time.monotonic() + OUTER_S  # the probe sees the answer on its own thread
        while scrape(url)[0]["nvml:0"] != 1.0 and time.monotonic() < end:
            time.sleep(0.05)
        assert scrape(url) == ({"nvml:0": 1.0, "nvml:1": 1.0}, {"nvml:0", "nvml:1"})
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=OUTER_S)
    assert err.count("nvml:0: down") == 1, err
    assert [gpu.writes for gpu in nvml.state()] == [0, 0]  # scrapes only read


def test_an_exporter_started_with_a_gpu_wedged_serves_the_other(nvml):
    pytest.importorskip("prometheus_client", reason="pip install 'gpu-governor[metrics]'")
    import os
    import urllib.request

    nvml.hang(0)
    env = dict(env_of(nvml), PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen(
        [sys.executable, "-m", "governor", "exporter", "--listen", "127.0.0.1:0", "--json"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        started = json.loads(proc.stdout.readline())
        assert started["devices"] == ["nvml:1"]
        text = urllib.request.urlopen(started["url"], timeout=OUTER_S).read().decode()
        assert 'governor_device_up{board="",device="nvml:0"' in text or 'device="nvml:0"' in text
        nvml.unhang(0)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=OUTER_S)
    assert "nvml:0" in err and "not responding" in err, err
