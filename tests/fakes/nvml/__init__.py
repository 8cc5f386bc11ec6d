"""A fake NVIDIA driver library for the tests: ``fake_nvml.c`` built as ``libnvidia-ml.so.1``.

The real nvidia-ml-py (``pynvml``) loads it and runs unchanged above it, so the tests exercise
the binding's real marshalling, versioned symbols, buffer conventions and error classes.

- **Building**: :func:`build_library` compiles the C file with the system compiler (``$CC``,
  ``cc`` or ``gcc``) into a directory, once per test session; without a compiler the tests
  that need it are skipped and say why.
- **In this process**: :func:`load_in_process` opens the library by its full path first.
  glibc then hands the already-loaded object to pynvml's ``CDLL("libnvidia-ml.so.1")``,
  because a loaded library answers to its SONAME.
- **In subprocesses**: :meth:`FakeNvml.env` puts the build directory on ``LD_LIBRARY_PATH``.
- **What the driver did**: setters write locked clocks and power limits to the state file
  (``FAKE_NVML_STATE``) under ``flock``; every process sees the same GPUs. Tests read it with
  :meth:`FakeNvml.state`, never through the library.
- **What the driver is**: :meth:`FakeNvml.configure` writes ``FAKE_NVML_CONFIG`` (number of
  GPUs, per-GPU tables, unprivileged mode, NOT_SUPPORTED functions, MIG instances, init
  failure). The library reads it when ``nvmlInit`` takes the reference count from 0 to 1.
  Without ``FAKE_NVML_CONFIG`` it acts like a machine whose driver is not loaded, so the
  library staying loaded in this process shows no GPU to tests that did not ask for one.
- **What goes wrong**: :meth:`FakeNvml.faults` writes ``FAKE_NVML_FAULTS``, which the library
  reads again on every call on a GPU: a GPU lost (``NVML_ERROR_GPU_IS_LOST`` from every call)
  or flaky (every k-th call in each process returns a transient error), switched on and off
  while governor runs.
- **A wedged driver**: :meth:`FakeNvml.hang` creates ``<state>.hang<N>``; while it exists every
  call on GPU N blocks (polled), as on a GPU in a bad state; :meth:`FakeNvml.unhang` removes it.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import pytest

__all__ = [
    "A100",
    "T4",
    "FakeNvml",
    "Gpu",
    "GpuState",
    "build_library",
    "load_in_process",
]

SOURCE = Path(__file__).with_name("fake_nvml.c")
SONAME = "libnvidia-ml.so.1"

# The built-in GPUs of fake_nvml.c (index 0, 2, ... and 1, 3, ...), for tests to name them.
A100 = {
    "name": "NVIDIA A100-SXM4-80GB",
    "uuid": "GPU-a1000000-2222-3333-4444-555555555555",
    "pci": "00000000:07:00.0",
}
T4 = {
    "name": "Tesla T4",
    "uuid": "GPU-7e540001-aaaa-bbbb-cccc-dddddddddddd",
    "pci": "00000000:3B:00.0",
}


def _compiler() -> Optional[str]:
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def build_library(out_dir: Path) -> Path:
    """Compile the fake into ``out_dir/libnvidia-ml.so.1``; returns ``out_dir``.

    Skips the calling test when no C compiler is installed.
    """
    cc = _compiler()
    if cc is None:
        pytest.skip("the fake NVML driver needs a C compiler (cc or gcc; or set CC)")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / SONAME
    cmd = [
        cc,
        "-shared",
        "-fPIC",
        "-O1",
        "-Wall",
        "-Wextra",
        "-fvisibility=hidden",
        f"-Wl,-soname,{SONAME}",
        "-o",
        str(target),
        str(SOURCE),
        "-lpthread",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"building the fake NVML driver failed:\n{' '.join(cmd)}\n{proc.stderr}")
    return out_dir


_loaded: Dict[str, ctypes.CDLL] = {}


def load_in_process(lib_dir: Path) -> ctypes.CDLL:
    """Load the fake into this process so that pynvml's ``CDLL("libnvidia-ml.so.1")`` gets it.

    pynvml keeps the library it loaded in ``pynvml.nvmlLib`` and the symbols it looked up in a
    cache; if those point elsewhere (another build, a real driver) they are dropped.
    """
    path = str(Path(lib_dir) / SONAME)
    lib = _loaded.get(path)
    if lib is None:
        if _loaded:
            raise RuntimeError("a different fake NVML library is already loaded in this process")
        lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        _loaded[path] = lib
    import pynvml

    current = pynvml.nvmlLib
    if current is not None and getattr(current, "_handle", None) != lib._handle:
        pynvml.nvmlLib = None
        pynvml._nvmlGetFunctionPointer_cache.clear()
    return lib


@dataclass
class Gpu:
    """One GPU of the fake driver; None keeps the built-in value of its index."""

    name: Optional[str] = None
    uuid: Optional[str] = None
    serial: Optional[str] = None
    pci: Optional[str] = None  # domain:bus:device.function
    minor: Optional[int] = None  # /dev/nvidia<minor> (default: the index)
    clocks: Optional[Mapping[int, Tuple[int, int, int]]] = None  # mem MHz -> (lo, hi, step)
    power_mw: Optional[int] = None
    instant_mw: Optional[int] = None  # -1: NVML_FI_DEV_POWER_INSTANT not available
    average_mw: Optional[int] = None
    energy_mj: Optional[int] = None
    temperature_c: Optional[int] = None
    utilisation_pct: Optional[int] = None
    reasons: Optional[int] = None
    graphics_mhz: Optional[int] = None
    power_limits_mw: Optional[Tuple[int, int, int]] = None  # min, max, default
    mig: Sequence[str] = ()
    not_supported: Sequence[str] = ()
    # workload power profiles (Blackwell): (requested ids, enforced ids); None: not supported
    power_profiles: Optional[Tuple[Sequence[int], Sequence[int]]] = None

    def lines(self, index: int) -> List[str]:
        out = []
        for key in (
            "name",
            "uuid",
            "serial",
            "pci",
            "minor",
            "power_mw",
            "instant_mw",
            "average_mw",
            "energy_mj",
            "temperature_c",
            "utilisation_pct",
            "reasons",
            "graphics_mhz",
        ):
            value = getattr(self, key)
            if value is not None:
                out.append(f"gpu.{index}.{key} = {value}")
        for mem, (lo, hi, step) in (self.clocks or {}).items():
            out.append(f"gpu.{index}.clocks.{mem} = {lo}:{hi}:{step}")
        if self.power_limits_mw is not None:
            out.append(f"gpu.{index}.power_limits = " + ":".join(map(str, self.power_limits_mw)))
        if self.mig:
            out.append(f"gpu.{index}.mig = " + ",".join(self.mig))
        if self.not_supported:
            out.append(f"gpu.{index}.not_supported = " + ",".join(self.not_supported))
        if self.power_profiles is not None:
            requested, enforced = self.power_profiles
            out.append(
                f"gpu.{index}.power_profiles = "
                + ",".join(map(str, requested))
                + "/"
                + ",".join(map(str, enforced))
            )
        return out


@dataclass(frozen=True)
class GpuState:
    """What the fake driver holds for one GPU (clocks in MHz, limit in mW; None: not locked)."""

    uuid: str
    gpu_locked: Optional[Tuple[int, int]]
    mem_locked: Optional[Tuple[int, int]]
    power_limit_mw: int
    writes: int


@dataclass
class FakeNvml:
    """The fake driver of one test: its config and state files, and the environment to use it."""

    lib_dir: Path
    work_dir: Path
    monkeypatch: pytest.MonkeyPatch
    lib: Optional[ctypes.CDLL] = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.config_path = self.work_dir / "config"
        self.state_path = self.work_dir / "state"
        self.faults_path = self.work_dir / "faults"
        self.lib = load_in_process(self.lib_dir)
        self._balance()
        self.configure()
        self.monkeypatch.setenv("FAKE_NVML_CONFIG", str(self.config_path))
        self.monkeypatch.setenv("FAKE_NVML_STATE", str(self.state_path))
        self.monkeypatch.setenv("FAKE_NVML_FAULTS", str(self.faults_path))

    def configure(
        self,
        *gpus: Gpu,
        count: Optional[int] = None,
        unprivileged: bool = False,
        not_supported: Sequence[str] = (),
        init_error: Optional[int] = None,
    ) -> FakeNvml:
        """Describe the machine: ``gpus`` override the built-in GPUs 0, 1, ...; ``count``
        GPUs in all (default: as many as given, or the two built-in ones)."""
        n = count if count is not None else (len(gpus) if gpus else 2)
        lines = [f"gpus = {n}", f"unprivileged = {int(unprivileged)}"]
        if not_supported:
            lines.append("not_supported = " + ",".join(not_supported))
        if init_error is not None:
            lines.append(f"init_error = {int(init_error)}")
        for index, gpu in enumerate(gpus):
            lines.extend(gpu.lines(index))
        self.config_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return self

    def env(self, base: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
        """An environment in which a subprocess's pynvml loads this fake."""
        env = dict(os.environ if base is None else base)
        paths = [str(self.lib_dir)] + [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p]
        env["LD_LIBRARY_PATH"] = ":".join(paths)
        env["FAKE_NVML_CONFIG"] = str(self.config_path)
        env["FAKE_NVML_STATE"] = str(self.state_path)
        env["FAKE_NVML_FAULTS"] = str(self.faults_path)
        return env

    def faults(
        self, lost: Sequence[int] = (), flaky: Optional[Mapping[int, int]] = None, code: int = 10
    ) -> FakeNvml:
        """Switch faults on (or, with no arguments, all off), effective from the next call in
        every process: the GPUs in ``lost`` fall off the bus (``NVML_ERROR_GPU_IS_LOST``);
        on GPU ``i`` of ``flaky``, every ``flaky[i]``-th call returns ``code`` (default
        ``NVML_ERROR_TIMEOUT``, 10)."""
        lines = [f"gpu.{i}.lost = 1" for i in lost]
        lines += [f"gpu.{i}.flaky = {every}:{code}" for i, every in (flaky or {}).items()]
        partial = self.faults_path.with_name(self.faults_path.name + ".new")
        partial.write_text("\n".join(lines) + "\n", encoding="utf-8")
        os.replace(partial, self.faults_path)  # the library never reads a half-written file
        return self

    def hang_path(self, index: int) -> Path:
        """The file whose presence wedges GPU ``index`` (``<state>.hang<N>``)."""
        return self.state_path.with_name(f"{self.state_path.name}.hang{index}")

    def hang(self, index: int, *, global_lock: bool = False) -> FakeNvml:
        """Wedge GPU ``index``: from the next call, every call on it (in every process)
        blocks until :meth:`unhang`. With ``global_lock`` the blocked call holds the library's
        lock, so every other call in that process blocks behind it too."""
        self.hang_path(index).write_text("global\n" if global_lock else "hang\n")
        return self

    def unhang(self, index: int) -> FakeNvml:
        """GPU ``index`` answers again: blocked calls finish within a few ms."""
        try:
            self.hang_path(index).unlink()
        except FileNotFoundError:
            pass
        return self

    def state(self) -> List[GpuState]:
        """The fake driver's state file, GPU by GPU in NVML index order ([] before any init)."""
        if not self.state_path.exists():
            return []
        import fcntl

        # under the driver's flock: it truncates, then writes, so an unlocked read can see
        # an empty file while another process (a Slurm prolog) changes a clock
        with open(self.state_path, encoding="utf-8") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_SH)
            text = f.read()
        out = []
        for line in text.splitlines():
            words = line.split()
            if not words or words[0] != "gpu":
                continue
            values = dict(w.split("=", 1) for w in words[2:])

            def pair(text: str) -> Optional[Tuple[int, int]]:
                lo, hi = (int(v) for v in text.split(","))
                return None if (lo, hi) == (0, 0) else (lo, hi)

            out.append(
                GpuState(
                    uuid=words[1],
                    gpu_locked=pair(values["gpu_locked"]),
                    mem_locked=pair(values["mem_locked"]),
                    power_limit_mw=int(values["power_limit_mw"]),
                    writes=int(values["writes"]),
                )
            )
        return out

    def gpu(self, index: int) -> GpuState:
        """The state of NVML GPU ``index``."""
        return self.state()[index]

    def drop_locks(self, index: int) -> FakeNvml:
        """What a GPU reset does behind every client's back: GPU ``index``'s clock locks are
        gone from the driver (its state file, rewritten under the driver's own lock; works
        while the GPU is wedged, as the file is not the GPU)."""
        import fcntl
        import re

        with open(self.state_path, "r+", encoding="utf-8") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            lines = f.read().splitlines()
            rows = [i for i, line in enumerate(lines) if line.startswith("gpu ")]
            row = rows[index]
            lines[row] = re.sub(r"(gpu|mem)_locked=\d+,\d+", r"\1_locked=0,0", lines[row])
            f.seek(0)
            f.truncate()
            f.write("\n".join(lines) + "\n")
        return self

    def _balance(self) -> int:
        """Shut down what an earlier test left initialised in this process; returns how many."""
        assert self.lib is not None
        leaked = 0
        while self.lib.nvmlShutdown() == 0:
            leaked += 1
        import pynvml

        pynvml._nvmlLib_refcount = 0
        return leaked

    def close(self) -> int:
        """End of the test: let wedged GPUs go, undo leaked initialisations; returns how many
        there were."""
        for path in self.work_dir.glob(self.state_path.name + ".hang*"):
            path.unlink()
        return self._balance()
