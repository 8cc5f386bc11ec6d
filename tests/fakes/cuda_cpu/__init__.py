"""CUDA kernels run on the CPU: the library's real CUDA C, compiled with the system C++
compiler against ``cuda_cpu.h`` (blocks one at a time, a block's threads as fibers with a
barrier for ``__syncthreads()``), behind a stand-in for the part of CuPy the library uses.

    binary = build([(source, entry), ...], cache_dir)    # one g++ run per batch, cached
    with CpuCupy(binary, compute_capability="80") as cp:
        a = cp.asarray(numpy_array)
        cp.RawKernel(source, entry)(grid, block, (a, cp.int32(n)))
        cp.asnumpy(a)

Each source is written to its own file and ``#include``d unchanged (the text NVRTC and CuPy
get, with its ``#define`` lines) inside a namespace of its own, its entry point renamed by a
macro so that many configurations share one binary. ``cp.schedule`` picks the order in which
a block's threads run between barriers: ``("forward", 0)``, ``("reversed", 0)`` or
``("shuffled", seed)``.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, Iterable, List, Sequence, Tuple

import numpy as np

HERE = Path(__file__).resolve().parent
FLAGS = ("-std=c++17", "-O1", "-w", "-fno-strict-aliasing")
ORDERS = {"forward": 0, "reversed": 1, "shuffled": 2}


class EmulationError(RuntimeError):
    """The emulation refused a launch: a barrier not reached by every thread, a write
    outside an array, a kernel not compiled in, bad arguments."""


def config_name(source: str, entry: str) -> str:
    """The name of one configuration inside a binary (a hash of its source and entry)."""
    return "k" + hashlib.sha1(f"{entry}\n{source}".encode()).hexdigest()[:16]


def _parameters(source: str, entry: str) -> List[str]:
    """The parameter declarations of ``entry`` in ``source`` (``const real_t* __restrict__
    A``, ``int n``, ...)."""
    start = source.find("__global__")
    match = re.compile(rf"\b{re.escape(entry)}\s*\(([^)]*)\)").search(source, max(start, 0))
    if start < 0 or match is None:
        raise EmulationError(f"no __global__ function {entry} in the source")
    return [p.strip() for p in match.group(1).split(",") if p.strip()]


def _cast(declaration: str, k: int) -> str:
    """The wrapper's expression for argument ``k``: a pointer, an integer or a real."""
    kind = declaration.rsplit(None, 1)[0] if " " in declaration else declaration
    if "*" in declaration:
        return f"({kind})a[{k}].p"
    if re.search(r"\b(int|unsigned|long|short|size_t|char)\b", kind):
        return f"({kind})a[{k}].i"
    return f"({kind})a[{k}].d"


def _unit(configs: Sequence[Tuple[str, str, str]], folder: Path) -> str:
    """A translation unit that includes each configuration's source in its own namespace."""
    out = ['#include "cuda_cpu.h"']
    for name, source, entry in configs:
        path = folder / f"{name}.cu"
        path.write_text(source)
        macros = re.findall(r"^\s*#\s*define\s+(\w+)", source, re.M)
        params = _parameters(source, entry)
        args = ", ".join(_cast(p, k) for k, p in enumerate(params))
        out += [
            f"namespace {name} {{",
            f"#define {entry} {name}_entry",
            f'#include "{path.name}"',
            f"#undef {entry}",
            *[f"#undef {m}" for m in macros],
            f"void call(const emu::Arg* a) {{ {name}_entry({args}); }}",
            f"extern const int nargs = {len(params)};",
            "}",
        ]
    return "\n".join(out) + "\n"


def _entries(configs: Sequence[Tuple[str, str, str]]) -> str:
    out = ['#include "cuda_cpu.h"']
    for name, _, _ in configs:
        out.append(f"namespace {name} {{ void call(const emu::Arg* a); extern const int nargs; }}")
    rows = ", ".join(f'{{"{n}", {n}::call, {n}::nargs}}' for n, _, _ in configs)
    out.append(f"extern const emu::Entry emu_entries[] = {{{rows}}};")
    out.append(f"extern const int emu_entry_count = {len(configs)};")
    return "\n".join(out) + "\n"


def _compile(cxx: str, unit: Path, obj: Path) -> None:
    tmp = obj.with_suffix(f".{os.getpid()}.tmp")
    done = subprocess.run(
        [cxx, *FLAGS, "-I", str(HERE), "-c", str(unit), "-o", str(tmp)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise EmulationError(f"g++ failed on {unit.name}:\n{done.stderr[-4000:]}")
    tmp.replace(obj)


def build(
    sources: Iterable[Tuple[str, str]], cache_dir: Path, batch: int = 24, jobs: int = 2
) -> Path:
    """A binary holding every ``(source, entry)``; objects and binaries are cached in
    ``cache_dir`` by the hash of what they were built from."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        raise EmulationError("no C++ compiler (g++) on PATH")
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    configs = sorted({(config_name(s, e), s, e) for s, e in sources})
    header = (HERE / "cuda_cpu.h").read_bytes() + " ".join(FLAGS).encode()
    stamp = hashlib.sha1(header).hexdigest()[:12]  # what every unit depends on
    host_stamp = hashlib.sha1(header + (HERE / "host.cpp").read_bytes()).hexdigest()[:12]
    key = hashlib.sha1((host_stamp + "".join(n for n, _, _ in configs)).encode()).hexdigest()[:16]
    binary = cache_dir / f"emu-{key}"
    if binary.exists():
        return binary
    work = Path(tempfile.mkdtemp(prefix="cuda_cpu_", dir=cache_dir))
    chunks = [configs[k : k + batch] for k in range(0, len(configs), batch)]
    jobs_list: List[Tuple[Path, Path]] = []
    objects: List[Path] = []
    for chunk in chunks:
        text = _unit(chunk, work)
        obj = cache_dir / f"unit-{stamp}-{hashlib.sha1(text.encode()).hexdigest()[:16]}.o"
        objects.append(obj)
        if not obj.exists():
            unit = work / f"{obj.stem}.cpp"
            unit.write_text(text)
            jobs_list.append((unit, obj))
    host = cache_dir / f"host-{host_stamp}.o"
    if not host.exists():
        jobs_list.append((HERE / "host.cpp", host))
    entries = work / "entries.cpp"
    entries.write_text(_entries(configs))
    jobs_list.append((entries, work / "entries.o"))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(lambda job: _compile(cxx, *job), jobs_list))
    tmp = work / "emu"
    done = subprocess.run(
        [cxx, *objects, str(host), str(work / "entries.o"), "-o", str(tmp)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise EmulationError(f"linking failed:\n{done.stderr[-4000:]}")
    tmp.replace(binary)
    shutil.rmtree(work, ignore_errors=True)
    return binary


class EmuArray:
    """A device array of the emulation: its bytes live in the emulator process."""

    def __init__(self, cp: CpuCupy, handle: int, shape: Tuple[int, ...], dtype: Any) -> None:
        self._cp = cp
        self.handle = handle
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def copy(self) -> EmuArray:
        out = self._cp._new(self.shape, self.dtype)
        self._cp._command(f"copy {out.handle} {self.handle}")
        return out


class CpuCupy:
    """The part of CuPy the library uses, over one emulator process."""

    float32 = np.float32
    float64 = np.float64
    int32 = np.int32

    def __init__(self, binary: Path, compute_capability: str = "80") -> None:
        self._proc = subprocess.Popen(
            [str(binary)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self._tmp = Path(tempfile.mkdtemp(prefix="cuda_cpu_io_"))
        self._next = 0
        self.schedule: Tuple[str, int] = ("forward", 0)
        self.launches: List[Dict[str, Any]] = []
        self.kernels: List[Any] = []
        self.cuda = self._cuda_namespace(compute_capability)
        cp = self

        class RawKernel:
            def __init__(self, source: str, name: str) -> None:
                self.source = source
                self.name = name
                self.config = config_name(source, name)
                self.preferred_shared_memory_carveout = -1
                cp.kernels.append(self)

            def __call__(self, grid: Any, block: Any, args: Sequence[Any]) -> None:
                cp._launch(self, grid, block, args)

        self.RawKernel = RawKernel

    @staticmethod
    def _cuda_namespace(compute_capability: str) -> Any:
        class CUDADriverError(RuntimeError):
            pass

        class Device:
            def __init__(self, index: int = 0) -> None:
                self.id = index
                self.compute_capability = compute_capability

        return types.SimpleNamespace(
            Device=Device, driver=types.SimpleNamespace(CUDADriverError=CUDADriverError)
        )

    def __enter__(self) -> CpuCupy:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.stdin.close()
            self._proc.wait(timeout=60)
        shutil.rmtree(self._tmp, ignore_errors=True)

    def _command(self, line: str) -> None:
        if self._proc.poll() is not None:
            raise EmulationError(f"the emulator exited ({self._proc.returncode})")
        self._proc.stdin.write(line + "\n")
        self._proc.stdin.flush()
        reply = self._proc.stdout.readline().strip()
        if reply != "ok":
            raise EmulationError(reply[len("error ") :] if reply else "the emulator died")

    def _new(self, shape: Tuple[int, ...], dtype: Any) -> EmuArray:
        self._next += 1
        out = EmuArray(self, self._next, shape, dtype)
        self._command(f"alloc {out.handle} {out.nbytes} {out.dtype.itemsize}")
        return out

    def asarray(self, host: Any) -> EmuArray:
        host = np.ascontiguousarray(host)
        out = self._new(host.shape, host.dtype)
        path = self._tmp / "in.bin"
        host.tofile(path)
        self._command(f"write {out.handle} {path}")
        return out

    def zeros(self, shape: Any, dtype: Any = np.float64) -> EmuArray:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        return self._new(shape, dtype)

    def asnumpy(self, array: EmuArray) -> Any:
        path = self._tmp / "out.bin"
        self._command(f"read {array.handle} {path}")
        return np.fromfile(path, dtype=array.dtype).reshape(array.shape)

    def _launch(self, kernel: Any, grid: Any, block: Any, args: Sequence[Any]) -> None:
        grid = tuple(grid) + (1,) * (3 - len(tuple(grid)))
        block = tuple(block) + (1,) * (3 - len(tuple(block)))
        words = []
        for arg in args:
            if isinstance(arg, EmuArray):
                words.append(f"p {arg.handle}")
            elif isinstance(arg, (np.integer, int)) and not isinstance(arg, bool):
                words.append(f"i {int(arg)}")
            elif isinstance(arg, (np.floating, float)):
                words.append(f"d {float(arg)!r}")
            else:
                raise EmulationError(f"argument {arg!r} of type {type(arg).__name__}")
        order, seed = self.schedule
        self.launches.append(
            {
                "kernel": kernel.name,
                "grid": grid,
                "block": block,
                "carveout": kernel.preferred_shared_memory_carveout,
                "args": [type(a).__name__ for a in args],
            }
        )
        line = (
            f"launch {kernel.config} {' '.join(str(int(g)) for g in grid)} "
            f"{' '.join(str(int(b)) for b in block)} {ORDERS[order]} {int(seed)} "
            f"{len(words)} {' '.join(words)}"
        )
        self._command(line)
