"""scripts/gpu_check.py end to end: against the real nvidia-ml-py over the fake C driver (with
control, and refused like in a container), on a simulated board for the steps that need a
load, and with no GPU at all. What the driver did is read from the fake's state file; what
the check found, from its report.json."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
from fakes.nvml import A100

import governor.devices.nvml as backend
from governor.calibrate.loads import ThreadedLoad
from governor.paths import state_dir

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check.py"
STEPS = [
    "discovery",
    "telemetry",
    "loads",
    "control",
    "calibration",
    "energy-windows",
    "kernels",
    "tune-blocks",
    "exporter",
]
needs_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="NVML control needs root (governor asks before the driver does)",
)


def _nvidia_smi(tmp_path: Path, max_limit_w: float = 400.0) -> Path:
    """A stand-in ``nvidia-smi`` printing the fake A100's row for the check's query."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    row = (
        f"{A100['uuid']}, {A100['name']}, 550.54.15, {A100['pci']}, 400.00, 100.00, "
        f"{max_limit_w:.2f}, 400.00, 1410, 71.00, 33"
    )
    script = bin_dir / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        'case "$1" in --query-gpu=*) ;; *) echo "unexpected $*" >&2; exit 2;; esac\n'
        f"echo '{row}'\n"
    )
    script.chmod(0o755)
    return bin_dir


def _run(env, out: Path, *args: str, timeout: float = 240):
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(ROOT),
    )
    return proc


def _report(out: Path):
    doc = json.loads((out / "report.json").read_text())
    return doc, {s["name"]: s for s in doc["steps"]}


def _layers_left():
    directory = state_dir()
    if not directory.exists():
        return 0
    return sum(
        len(json.loads(p.read_text()).get("layers", [])) for p in directory.glob("journal-*.json")
    )


def test_no_gpu_refuses_in_one_line(tmp_path):
    env = dict(os.environ)
    env.pop("FAKE_NVML_CONFIG", None)
    env["LD_LIBRARY_PATH"] = str(tmp_path)  # no libnvidia-ml.so.1 anywhere it looks first
    out = tmp_path / "out"
    proc = _run(env, out, timeout=60)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu_check: no NVIDIA GPU"), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert not out.exists()


def test_governor_doctor_runs_the_check(tmp_path):
    env = dict(os.environ)
    env.pop("FAKE_NVML_CONFIG", None)
    env["LD_LIBRARY_PATH"] = str(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "governor", "doctor", "--gpu-check", str(tmp_path / "out")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("gpu_check: no NVIDIA GPU") and proc.stderr.count("\n") == 1


def test_a_loaded_library_without_a_driver_refuses_too(fake_nvml, tmp_path):
    env = fake_nvml.env()
    env.pop("FAKE_NVML_CONFIG")  # the fake then acts like a machine whose driver is not loaded
    proc = _run(env, tmp_path / "out", timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "Driver Not Loaded" in proc.stderr


def test_bad_usage_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "file").write_text("")
    for out, args in (
        (tmp_path / "out", ["--only", "nonsense"]),
        (tmp_path / "out", ["--device", "jetson"]),
        (tmp_path / "out", ["--time-scale", "-1"]),
        (tmp_path / "file" / "out", ["--device", "sim:a100-sxm"]),  # cannot be written
    ):
        proc = _run(dict(os.environ), out, *args, timeout=60)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


@needs_root
def test_every_step_runs_or_says_why_on_the_stand_in(fake_nvml, tmp_path):
    """With control: the clocks and power limit the check set reached the driver and were
    put back; nvidia-smi agrees with NVML; the steps that need CuPy say so."""
    env = fake_nvml.env()
    env["PATH"] = f"{_nvidia_smi(tmp_path)}{os.pathsep}{env['PATH']}"
    out = tmp_path / "out"
    proc = _run(env, out, "--quick", "--time-scale", "0.2", "--budget-s", "900")
    assert proc.returncode == 0, proc.stderr
    doc, steps = _report(out)
    assert [s["name"] for s in doc["steps"]] == STEPS
    for step in doc["steps"]:
        assert set(step) >= {"name", "status", "reason", "figures"}
        assert step["status"] in ("pass", "skip"), step
        assert step["status"] == "pass" or step["reason"], step  # a skip says why
    # one progress line per step when it starts and one when it ends, plus header and footer
    for name in STEPS:
        assert sum(f"] {name} " in line for line in proc.stderr.splitlines()) == 2, name
    assert doc["control"] == {"permitted": True, "reason": None}
    smi = {c["name"]: c for c in steps["discovery"]["checks"]}
    for name in ("name", "driver version", "power.max_limit", "power.limit", "temperature"):
        assert smi[name]["ok"], smi[name]
    assert steps["discovery"]["figures"]["uuid"] == A100["uuid"]
    for name in ("loads", "calibration", "tune-blocks"):
        assert steps[name]["status"] == "skip" and "CuPy" in steps[name]["reason"]
    assert steps["kernels"]["status"] == "skip" and "CuPy" in steps["kernels"]["reason"]
    assert "CuPy" in steps["telemetry"]["reason"]  # idle only
    control = {c["name"]: c for c in steps["control"]["checks"]}
    for name in ("power limit set", "power limit restored", "governor apply", "governor reset"):
        assert control[name]["ok"], control[name]
    assert [r["locked_mhz"] for r in steps["control"]["figures"]["locks"]] == [450, 810, 1170]
    assert steps["energy-windows"]["status"] == "pass"
    assert steps["exporter"]["status"] == "pass"
    # the driver was changed (locks, a power limit, apply) and is back as it was
    gpu = fake_nvml.gpu(0)
    assert gpu.writes >= 8
    assert gpu.gpu_locked is None and gpu.mem_locked is None
    assert gpu.power_limit_mw == 400000
    assert _layers_left() == 0
    assert doc["final_reset"]["failed"] == {}
    md = (out / "report.md").read_text()
    assert "| step | status | read-only | figures | reason |" in md
    assert all(f"| {name} |" in md for name in STEPS)


def test_refused_control_says_so_once_and_runs_the_read_only_steps(fake_nvml, tmp_path):
    fake_nvml.configure(unprivileged=True)  # setters answer NVML_ERROR_NO_PERMISSION
    out = tmp_path / "out"
    proc = _run(fake_nvml.env(), out, "--quick", "--time-scale", "0.2", "--budget-s", "900")
    assert proc.returncode == 0, proc.stderr
    doc, steps = _report(out)
    assert doc["control"]["permitted"] is False and doc["control"]["reason"]
    assert sum("read-only:" in line and "still runs" in line for line in proc.stderr.splitlines())
    assert proc.stderr.count(doc["control"]["reason"]) == 1  # the reason once, not per step
    for name in ("control", "calibration", "tune-blocks"):
        assert steps[name]["status"] == "skip" and steps[name]["reason"].startswith("read-only")
        assert steps[name]["read_only"] is False
    for name in ("discovery", "telemetry", "energy-windows", "exporter"):
        assert steps[name]["status"] == "pass", steps[name]
        assert steps[name]["read_only"] is True
    assert all(g.writes == 0 for g in fake_nvml.state())  # nothing reached the driver
    assert "nvidia-smi not found" in steps["discovery"]["reason"]


def test_nvidia_smi_disagreeing_fails_discovery_alone(fake_nvml, tmp_path):
    env = fake_nvml.env()
    env["PATH"] = f"{_nvidia_smi(tmp_path, max_limit_w=350)}{os.pathsep}{env['PATH']}"
    out = tmp_path / "out"
    proc = _run(env, out, "--only", "discovery,exporter", "--read-only")
    assert proc.returncode == 1
    _, steps = _report(out)
    assert steps["discovery"]["status"] == "fail"
    assert steps["discovery"]["reason"] == "outside tolerance: power.max_limit"
    assert steps["exporter"]["status"] == "pass"
    assert steps["control"]["reason"] == "not selected (--only)"


# -- in process: the steps that need a load -----------------------------------------------------
@pytest.fixture
def gpu_check(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    import gpu_check

    return gpu_check


class _SleepLoad(ThreadedLoad):
    """A load that keeps no GPU busy: each unit is a short sleep."""

    name = "sleep"

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def _run_once(self) -> None:
        time.sleep(0.005)


def test_a_load_that_changes_nothing_fails_telemetry_and_control_still_holds(
    gpu_check, fake_nvml, tmp_path, monkeypatch
):
    """The stand-in's power does not follow the load, so "load raises power" fails (the
    tolerance can fail); clocks locked under the load read back; apply/reset run."""
    monkeypatch.setattr(backend, "_is_root", lambda: True)
    monkeypatch.setenv("LD_LIBRARY_PATH", fake_nvml.env()["LD_LIBRARY_PATH"])
    lines = []
    rc = gpu_check.main(
        [
            "--out",
            str(tmp_path / "out"),
            "--quick",
            "--time-scale",
            "0.2",
            "--budget-s",
            "900",
            "--only",
            "telemetry,loads,control",
        ],
        make_load=lambda dev, kind: _SleepLoad(kind),
        progress=lines.append,
    )
    assert rc == 1
    _, steps = _report(tmp_path / "out")
    assert steps["telemetry"]["status"] == "fail"
    failed = [c["name"] for c in steps["telemetry"]["checks"] if not c["ok"]]
    assert "load raises power" in failed
    assert steps["loads"]["status"] == "pass"
    assert steps["loads"]["figures"]["compute"]["units_per_s"] > 10
    assert steps["control"]["status"] == "pass", steps["control"]
    assert "idle" not in steps["control"]["reason"]  # read back under the load
    assert fake_nvml.gpu(0).gpu_locked is None and fake_nvml.gpu(0).writes > 0


def test_calibration_and_tune_blocks_judged_against_the_sweep_on_a_simulated_board(
    gpu_check, tmp_path
):
    lines = []
    rc = gpu_check.main(
        [
            "--out",
            str(tmp_path / "out"),
            "--device",
            "sim:a100-sxm",
            "--quick",
            "--time-scale",
            "0.4",
            "--budget-s",
            "900",
            "--only",
            "calibration,tune-blocks",
        ],
        progress=lines.append,
    )
    assert rc == 0, lines
    doc, steps = _report(tmp_path / "out")
    cal = steps["calibration"]
    assert cal["status"] == "pass", cal
    for label in ("compute", "memory"):
        fig = cal["figures"][label]
        sweep = {row["clock_mhz"]: row["energy_per_unit_j"] for row in fig["brute_force"]}
        assert fig["chosen_clock_mhz"] in sweep and len(sweep) >= 8
        best = min(sweep.values())
        assert fig["chosen_over_best"] == pytest.approx(
            sweep[fig["chosen_clock_mhz"]] / best, rel=1e-3
        )
        assert fig["probes"] <= 5 and fig["device_time_s"] > 0
    # the memory-bound load is calibrated lower than the compute-bound one
    assert (
        cal["figures"]["memory"]["chosen_clock_mhz"] < cal["figures"]["compute"]["chosen_clock_mhz"]
    )
    tune = steps["tune-blocks"]
    assert tune["status"] == "pass", tune
    assert tune["figures"]["start_clock_mhz"] == cal["figures"]["compute"]["chosen_clock_mhz"]
    assert doc["final_reset"]["changed"] is False
    md = (tmp_path / "out" / "report.md").read_text().splitlines()
    row = md[md.index("The row for the results table of docs/hardware.md:") + 2]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert len(cells) == 10 and cells[0] == doc["gpu"]["name"] and cells[4] == "yes"
    ratios = [cal["figures"][k]["chosen_over_best"] for k in ("compute", "memory")]
    assert cells[5] == ", ".join(f"{r:.3g}" for r in ratios)
    assert cells[9] == "none"


def test_a_step_that_raises_fails_alone_and_ctrl_c_restores(gpu_check, tmp_path):
    """An exception is a fail with a one-line reason and the next step runs; Ctrl-C inside a
    step that changed the board fails it, restores the board and skips the rest."""
    from gpucheck.core import Context, Control, Step, make_settings, run_steps

    import governor

    dev = governor.open_device("sim:a100-sxm")
    ctx = Context(dev, make_settings(True, 0.2), control=Control(True))

    def broken(ctx, out):
        raise ValueError("the sensor\nsaid no")

    def fine(ctx, out):
        out.check("ok", True, 1, "1")

    def interrupted(ctx, out):
        with ctx.owned("t"):
            dev.lock_gpu_clocks(810)
            assert dev.changed
            raise KeyboardInterrupt

    steps = [
        Step("a", broken, True),
        Step("b", fine, True),
        Step("c", interrupted, False),
        Step("d", fine, True),
    ]
    records, was_interrupted = run_steps(ctx, steps)
    assert [(r.name, r.status) for r in records] == [
        ("a", "fail"),
        ("b", "pass"),
        ("c", "fail"),
        ("d", "skip"),
    ]
    assert records[0].reason == "ValueError: the sensor said no"
    assert records[2].reason.startswith("interrupted")
    assert was_interrupted and not dev.owned
    assert dev.state().gpu_clocks_mhz is None  # the board's own state: unlocked again
    dev.close()


# -- the CuPy paths, over a fake CuPy ----------------------------------------------------------
def _fake_cupy(launch_s: float = 0.001):
    """A CuPy whose one CUDA GPU is the fake driver's A100 (same UUID and PCI bus id): kernels
    and copies take ``launch_s`` each (a 256-thread kernel twice that) and compute nothing; ``launches`` counts threads per
    block of every RawKernel launch."""
    cp = types.ModuleType("fake_cupy")
    cp.float32, cp.int32, cp.uint32 = float, int, int
    cp.launches = []

    class _Array:
        def __init__(self, n, dtype=None):
            self.size = n

    cp.empty = cp.ones = cp.zeros = _Array
    cp.empty_like = lambda a: _Array(a.size)
    cp.copyto = lambda dst, src: time.sleep(launch_s)

    class RawKernel:
        num_regs, shared_size_bytes = 16, 0

        def __init__(self, source, name):
            assert "__global__" in source and name in source
            self.name = name

        def __call__(self, grid, block, args):
            if block[0] > 1024:
                raise RuntimeError("cudaErrorInvalidConfiguration")
            cp.launches.append(block[0])
            # the plain default, 256 threads, runs twice as long as any other block size: the
            # check's chosen-over-default ratio then has a margin that the wall clock's
            # jitter on a loaded machine (and the fake counter's whole milliseconds) cannot
            # eat, as a real kernel's best block has over a poor one
            time.sleep(launch_s * (2.0 if block[0] == 256 else 1.0))

    cp.RawKernel = RawKernel

    class _Device:
        compute_capability = "80"
        attributes = {
            "MultiProcessorCount": 108,
            "MaxThreadsPerMultiProcessor": 2048,
            "L2CacheSize": 40 << 20,
        }

        def __init__(self, index=0):
            assert index == 0

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

        def synchronize(self):
            return None

    class _Stream(_Device):
        def __init__(self, non_blocking=False):
            pass

    class _Runtime:
        @staticmethod
        def getDeviceCount():
            return 1

        @staticmethod
        def getDeviceProperties(index):
            return {"uuid": bytes.fromhex(A100["uuid"][4:].replace("-", ""))}

        @staticmethod
        def deviceGetPCIBusId(index):
            return "0000:07:00.0"

        @staticmethod
        def memGetInfo():
            return (16 << 30, 80 << 30)

    cp.cuda = types.SimpleNamespace(Device=_Device, Stream=_Stream, runtime=_Runtime)
    return cp


def _kernel_library(cases):
    """A ``governor.kernels`` offering ``cases`` through the interface the check calls."""
    mod = types.ModuleType("governor.kernels")
    mod.gpu_check_cases = lambda cupy, index, cc: cases
    return mod


class _Case:
    tolerance = 1e-5

    def __init__(self, kernel, role, launch_s, error=1e-7):
        self.kernel, self.role, self.tiles = kernel, role, {"i": 32 if role == "chosen" else 16}
        self.launch_s, self.error = launch_s, error

    def run(self):
        time.sleep(self.launch_s)

    def max_error(self):
        return self.error


@pytest.fixture
def cupy_over_fake_driver(gpu_check, fake_nvml, monkeypatch):
    from governor.calibrate import cuda_loads

    cp = _fake_cupy()
    monkeypatch.setattr(cuda_loads, "_import_cupy", lambda: cp)
    monkeypatch.setattr(backend, "_is_root", lambda: True)
    monkeypatch.setenv("LD_LIBRARY_PATH", fake_nvml.env()["LD_LIBRARY_PATH"])
    return cp


def test_cupy_loads_tune_blocks_and_kernels_run_through_their_real_code(
    gpu_check, cupy_over_fake_driver, fake_nvml, tmp_path, monkeypatch
):
    """The built-in CUDA loads find the A100 by UUID and report rates; tune-blocks launches
    SAXPY at the block sizes the procedure asks for and locks the clocks it walks; the kernel
    step compares the chosen tiles with the default and catches a wrong result."""
    cases = [
        _Case("gemm", "default", 0.004),
        _Case("gemm", "chosen", 0.002),
        _Case("jacobi-2d", "default", 0.002),
        _Case("jacobi-2d", "chosen", 0.002, error=1e-2),  # wrong: the check must say so
    ]
    monkeypatch.setitem(sys.modules, "governor.kernels", _kernel_library(cases))
    out = tmp_path / "out"
    lines = []
    rc = gpu_check.main(
        [
            "--out",
            str(out),
            "--quick",
            "--time-scale",
            "0.2",
            "--budget-s",
            "900",
            "--only",
            "loads,kernels,tune-blocks",
        ],
        progress=lines.append,
    )
    assert rc == 1, lines  # the wrong kernel result fails the kernels step
    _, steps = _report(out)
    loads = steps["loads"]
    assert loads["status"] == "pass", loads
    assert loads["figures"]["compute"]["load"].startswith("cuda-fma (3456 blocks")
    assert loads["figures"]["compute"]["gflop_per_s"] > 0
    assert loads["figures"]["memory"]["gb_per_s"] > 0
    kernels = steps["kernels"]
    assert kernels["status"] == "fail"
    assert kernels["reason"] == "outside tolerance: jacobi-2d {'i': 32} correct"
    gains = kernels["figures"]["perf_per_watt_chosen_over_default"]
    assert gains["gemm"] > 1.3  # half the time at the same power: about twice the work per J
    assert "jacobi-2d" not in gains  # a wrong result earns no gain
    tune = steps["tune-blocks"]
    assert tune["status"] == "pass", tune
    assert tune["figures"]["compute_capability"] == "8.0"
    tried = set(cupy_over_fake_driver.launches)
    assert {256} < tried and all(32 <= t <= 1024 for t in tried)  # more than the default
    assert tune["figures"]["chosen"]["measurements"] >= 3
    assert fake_nvml.gpu(0).writes >= 2 and fake_nvml.gpu(0).gpu_locked is None


@needs_root
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_interrupted_mid_step_restores_the_driver_and_still_reports(fake_nvml, tmp_path, signum):
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--out", str(out), "--only", "control,exporter"],
        env=fake_nvml.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(ROOT),
    )
    deadline = time.monotonic() + 60
    while not fake_nvml.state() or fake_nvml.gpu(0).gpu_locked != (450, 450):
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "the check never locked the first clock"
        time.sleep(0.02)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    gpu = fake_nvml.gpu(0)
    assert gpu.gpu_locked is None and gpu.power_limit_mw == 400000
    assert _layers_left() == 0
    doc, steps = _report(out)
    assert doc["interrupted"] is True
    assert steps["control"]["status"] == "fail" and steps["control"]["reason"].startswith(
        "interrupted"
    )
    assert steps["exporter"] == {**steps["exporter"], "status": "skip", "reason": "interrupted"}


def test_a_spent_budget_skips_what_is_left_and_says_so(gpu_check, tmp_path):
    lines = []
    rc = gpu_check.main(
        ["--out", str(tmp_path / "out"), "--device", "sim:a100-sxm", "--budget-s", "0.001"],
        progress=lines.append,
    )
    assert rc == 0, lines
    doc, steps = _report(tmp_path / "out")
    assert doc["settings"]["total_budget_s"] == 0.001
    spent = [s["name"] for s in doc["steps"] if s["reason"] == "the run's time budget is spent"]
    assert "exporter" in spent and "tune-blocks" in spent  # the last give way, saying why
    assert all(s["status"] in ("pass", "skip") for s in doc["steps"])
    assert doc["final_reset"]["changed"] is False


class _BrokenLoad(_SleepLoad):
    def _run_once(self) -> None:
        from governor.calibrate.loads import LoadFailed

        raise LoadFailed("CUDA_ERROR_NO_BINARY_FOR_GPU")


def test_a_load_that_cannot_run_fails_the_loads_step(gpu_check, tmp_path):
    """Absent CuPy is a skip; a load that is there but cannot run is a fault, said as one."""
    rc = gpu_check.main(
        ["--out", str(tmp_path / "out"), "--device", "sim:a100-sxm", "--only", "loads,telemetry"],
        make_load=lambda dev, kind: _BrokenLoad(kind),
        progress=lambda line: None,
    )
    assert rc == 1
    _, steps = _report(tmp_path / "out")
    assert steps["loads"]["status"] == "fail"
    assert steps["loads"]["reason"] == "outside tolerance: compute load runs, memory load runs"
    assert "NO_BINARY" in steps["loads"]["checks"][0]["value"]
    assert steps["telemetry"]["status"] == "pass" and "idle only" in steps["telemetry"]["reason"]
