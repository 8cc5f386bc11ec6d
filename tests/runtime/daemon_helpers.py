"""Starting a daemon on a socket in a temporary directory, and talking to it as a client would."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

REPO = Path(__file__).resolve().parents[2]


def short_socket_dir() -> Path:
    """A fresh directory under /tmp (pytest's tmp_path can exceed the 108-byte socket limit)."""
    return Path(tempfile.mkdtemp(prefix="gvd-"))


def config_text(
    socket_path: Path, devices: Iterable[str], daemon: str = "", policy: str = ""
) -> str:
    lines = ["[daemon]", f'socket = "{socket_path}"', daemon]
    if "idle_timeout_s" not in daemon:
        lines.append("idle_timeout_s = 2.0")
    if policy:
        lines += ["[policy]", policy]
    for device in devices:
        lines += ["[[device]]", device]
    return "\n".join(lines) + "\n"


def send(socket_path: Path, payload: bytes, timeout_s: float = 5.0) -> Dict[str, Any]:
    """Send raw bytes, read one reply line (what an unprivileged client does)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        sock.connect(str(socket_path))
        try:
            sock.sendall(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the daemon hung up first; its reply is still queued
        data = b""
        while b"\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    return json.loads(data.split(b"\n", 1)[0])


def ask(socket_path: Path, **doc: Any) -> Dict[str, Any]:
    return send(socket_path, (json.dumps(doc) + "\n").encode())


def wait_for_socket(
    path: Path, proc: Optional[subprocess.Popen] = None, timeout_s: float = 15.0
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists():
            try:
                ask(path, action="status")
                return
            except OSError:
                pass
        if proc is not None and proc.poll() is not None:
            raise AssertionError(
                f"daemon exited early: {proc.stderr.read() if proc.stderr else ''}"
            )
        time.sleep(0.05)
    raise AssertionError(f"daemon did not listen on {path} within {timeout_s} s")


def start_daemon_process(
    config: Path, env: Optional[Dict[str, str]] = None, extra: List[str] = ()
) -> subprocess.Popen:
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env["PYTHONPATH"] = str(REPO) + os.pathsep + full_env.get("PYTHONPATH", "")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "governor",
            "daemon",
            "--config",
            str(config),
            "--test-mode",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full_env,
    )


def stop_process(proc: subprocess.Popen, timeout_s: float = 10.0) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout_s)


_READABLE_COPY: List[str] = []


def world_readable_source(repo: Path) -> str:
    """A PYTHONPATH entry an unprivileged user can import governor from: the checkout when
    every directory above it lets others in, else a copy of the package in a 0755 temporary
    directory (a clone under ``mktemp -d`` is 0700)."""
    repo = Path(os.path.realpath(repo))
    if all(os.stat(d).st_mode & stat.S_IXOTH for d in [repo, *repo.parents]):
        return str(repo)
    if not _READABLE_COPY:
        import atexit
        import shutil
        import tempfile

        base = tempfile.mkdtemp(prefix="governor-src-", dir="/tmp")
        os.chmod(base, 0o755)
        shutil.copytree(
            repo / "governor", Path(base) / "governor", ignore=shutil.ignore_patterns("__pycache__")
        )
        for root, dirs, files in os.walk(base):
            for name in dirs:
                os.chmod(os.path.join(root, name), 0o755)
            for name in files:
                os.chmod(os.path.join(root, name), 0o644)
        atexit.register(shutil.rmtree, base, True)
        _READABLE_COPY.append(base)
    return _READABLE_COPY[0]


def world_runnable_python() -> Optional[str]:
    """An interpreter every user may execute (pyenv under /root is not one)."""
    for candidate in (sys.executable, "/usr/bin/python3"):
        path = Path(os.path.realpath(candidate))
        if not path.is_file() or not os.stat(path).st_mode & stat.S_IXOTH:
            continue
        if all(os.stat(parent).st_mode & stat.S_IXOTH for parent in path.parents):
            return str(path)
    return None
