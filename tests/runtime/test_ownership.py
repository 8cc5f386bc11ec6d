"""Device state you can trust, on a fake AGX Orin sysfs tree with the real paths.

One owner per physical device; reading never undoes anyone's settings; layers stack
(apply, then run, then reset); a dead owner's settings are undone by the next owner or by
``reset``; corrupt journals are a message, not a dead end; planted links are refused. Every
test asserts the devfreq files themselves (what the kernel would see) and the files in the
state directory, not the library's view of them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from cli_helpers import run_cli
from hw_trees import build_agx_orin, install_tools

import governor
from governor.errors import DeviceBusyError, GovernorError
from governor.paths import state_dir
from governor.runtime import Governor

REPO = Path(__file__).resolve().parents[2]
DEFAULT = (306000000, 612000000)  # MODE_30W caps as the tree is built


@pytest.fixture
def jetson(tmp_path, monkeypatch):
    """An AGX Orin (JetPack 6, MODE_30W: 306-612 MHz) under a temporary root; returns a
    reader of the devfreq node's (min_freq, max_freq) files."""
    root = tmp_path / "root"
    info = build_agx_orin(root)
    monkeypatch.setenv("GOVERNOR_SYSFS_ROOT", str(root))
    bin_dir = install_tools(tmp_path / "bin", node=info["node"])
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    node = root / info["node"].lstrip("/")

    def caps():
        for _ in range(100):  # another process may be rewriting the file right now
            try:
                return (int((node / "min_freq").read_text()), int((node / "max_freq").read_text()))
            except ValueError:
                time.sleep(0.01)
        raise AssertionError("devfreq files stay unreadable")

    def defaults():
        table = [int(w) for w in (node / "available_frequencies").read_text().split()]
        return (min(table), max(table))

    caps.defaults = defaults
    caps.root = root
    caps.node = node
    caps.bin = bin_dir
    return caps


def journals():
    """The journal documents in the state directory, parsed from the files themselves."""
    directory = state_dir()
    if not directory.exists():
        return []
    return [json.loads(p.read_text()) for p in sorted(directory.glob("journal-*.json"))]


def layers():
    docs = journals()
    assert len(docs) <= 1
    return docs[0]["layers"] if docs else []


def _child(code: str, **env: str) -> subprocess.Popen:
    full = dict(os.environ, PYTHONPATH=str(REPO), **env)
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full,
    )


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "governor", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


GOVERN_AND_WAIT = """
    import time
    import governor
    from governor.runtime import Governor
    dev = governor.open_device({uri!r})
    with Governor(dev, {{"policy": "clock", "clock_mhz": {clock}}}, interval_s=0.05):
        print("ready", flush=True)
        time.sleep(120)
"""


@pytest.fixture
def governed(jetson):
    """A governor in another process holding the Jetson at 408 MHz; killed at the end."""
    children = []

    def start(clock: int = 408, uri: str = "jetson") -> subprocess.Popen:
        child = _child(GOVERN_AND_WAIT.format(uri=uri, clock=clock))
        children.append(child)
        line = child.stdout.readline().strip()
        assert line == "ready", child.stderr.read()
        return child

    yield start
    for child in children:
        if child.poll() is None:
            child.kill()
        child.wait()


def _crash(dev) -> None:
    """Let the device go without restoring it, as a process killed at this point would."""
    dev._ownership.let_go()
    dev._ownership = None


def _kill9(child: subprocess.Popen) -> None:
    os.kill(child.pid, signal.SIGKILL)
    child.wait()


# -- 1. reading a device undoes nothing ---------------------------------------------------------
def test_reading_while_another_process_governs_changes_nothing(jetson, governed, capsys):
    child = governed(408)
    assert jetson() == (408000000, 408000000)
    before = layers()
    assert len(before) == 1 and before[0]["owner"]["pid"] == child.pid
    assert before[0]["original"] == {"gpu_clocks": [306.0, 612.0]}

    for args in (["devices", "--json"], ["monitor", "--device", "jetson", "-n", "1", "--json"]):
        code, _, err = run_cli(capsys, *args)
        assert code == 0, err
    with governor.open_device("jetson") as dev:  # the library: open, read, close
        dev.sample()
        assert dev.state().gpu_clocks_mhz == (408.0, 408.0)
    # a calibration wants to change clocks: refused, nothing touched
    code, _, err = run_cli(capsys, "calibrate", "--device", "jetson", "--load", "true")
    assert code == 1 and "already governed by pid" in err and err.count("\n") == 1
    # a second run is refused as busy, and its failure undoes nothing either
    code, _, err = run_cli(capsys, "run", "--device", "jetson", "--policy", "max", "--", "true")
    assert code == 1 and f"pid {child.pid}" in err
    code, _, err = run_cli(capsys, "profile", "list")
    assert code == 0

    assert jetson() == (408000000, 408000000)
    assert layers() == before  # the journal is still the governor's, on disk

    _kill9(child)  # and because the journal survived, kill -9 can still be undone
    code, out, err = run_cli(capsys, "reset", "--device", "jetson", "--json")
    assert code == 0, err
    assert json.loads(out)["devices"][0]["restored"] == {"gpu_clocks": [306.0, 612.0]}
    assert jetson() == DEFAULT and journals() == []


# -- 2. run on top of apply ---------------------------------------------------------------------
def test_apply_then_run_then_reset_layers(jetson, tmp_path):
    done = _cli("apply", "--device", "jetson", "--clock", "510", "--json")
    assert done.returncode == 0, done.stderr
    assert jetson() == (510000000, 510000000)
    assert [layer["persistent"] for layer in layers()] == [True]

    seen = tmp_path / "seen"
    script = f"cat {jetson.node}/min_freq > {seen}"
    ran = _cli(
        "run", "--device", "jetson", "--policy", "clock", "--clock", "408", "--", "sh", "-c", script
    )
    assert ran.returncode == 0, ran.stderr
    assert seen.read_text().strip() == "408000000"  # the run governed on top of the apply
    assert jetson() == (510000000, 510000000)  # and gave the applied state back
    assert [layer["original"] for layer in layers()] == [{"gpu_clocks": [306.0, 612.0]}]

    reset = _cli("reset", "--device", "jetson")
    assert reset.returncode == 0, reset.stderr
    assert jetson() == DEFAULT and journals() == []


def test_two_applies_keep_the_true_original(jetson):
    assert _cli("apply", "--device", "jetson", "--clock", "510").returncode == 0
    assert _cli("apply", "--device", "jetson", "--clock", "408").returncode == 0
    assert jetson() == (408000000, 408000000)
    assert [layer["original"] for layer in layers()] == [{"gpu_clocks": [306.0, 612.0]}]
    assert _cli("reset", "--device", "jetson").returncode == 0
    assert jetson() == DEFAULT


def test_a_governor_over_an_apps_own_change_returns_to_it(jetson):
    with governor.open_device("jetson") as dev:
        dev.lock_gpu_clocks(510)
        with Governor(dev, {"policy": "clock", "clock_mhz": 408}, background=False):
            assert jetson() == (408000000, 408000000)
        assert jetson() == (510000000, 510000000)
        assert len(layers()) == 1  # the governor's layer is gone, the app's stays
    assert jetson() == DEFAULT and journals() == []


def test_kill_9_of_a_run_over_apply_next_owner_restores_only_the_dead_layer(jetson, governed):
    assert _cli("apply", "--device", "jetson", "--clock", "510").returncode == 0
    child = governed(408)
    assert jetson() == (408000000, 408000000)
    assert [layer["persistent"] for layer in layers()] == [True, False]
    _kill9(child)
    # the next owner (a new governor) finds the dead layer, restores it and says so
    done = _cli("run", "--device", "jetson", "--policy", "clock", "--clock", "306", "--", "true")
    assert done.returncode == 0, done.stderr
    assert f"pid {child.pid}" in done.stderr and "ended without restoring" in done.stderr
    assert jetson() == (510000000, 510000000)  # the apply survived both
    assert [layer["persistent"] for layer in layers()] == [True]
    assert _cli("reset", "--device", "jetson").returncode == 0
    assert jetson() == DEFAULT


# -- 3. identity, not spelling ------------------------------------------------------------------
def test_a_linked_sysfs_root_is_the_same_device(jetson, governed, tmp_path, monkeypatch):
    child = governed(408)
    alias = tmp_path / "alias-root"
    alias.symlink_to(jetson.root)
    monkeypatch.setenv("GOVERNOR_SYSFS_ROOT", str(alias))
    dev = governor.open_device("jetson")
    try:
        with pytest.raises(DeviceBusyError, match=f"pid {child.pid}"):
            dev.lock_gpu_clocks(510)
    finally:
        dev.close()
    assert jetson() == (408000000, 408000000)


def test_the_journal_names_the_physical_device(jetson):
    with governor.open_device("jetson") as dev:
        dev.lock_gpu_clocks(510)
        (doc,) = journals()
        assert doc["key"] == "jetson:" + os.path.realpath(jetson.node)
        assert doc["uri"] == "jetson" and doc["kind"] == "jetson"


def test_a_journal_of_another_device_is_never_applied(jetson, tmp_path, capsys):
    with governor.open_device("jetson") as dev:
        dev.lock_gpu_clocks(510)
        (path,) = state_dir().glob("journal-*.json")
        text = path.read_text()
    # the same file, claimed by another device: reset refuses it and touches nothing
    from governor.devices.journal import read_journal_bytes, write_journal

    journal = read_journal_bytes(text.encode())
    journal.key = "jetson:/sys/devices/other/devfreq/gpu"
    write_journal(path, journal)
    code, _, err = run_cli(capsys, "reset", "--device", "jetson")
    assert code == 1 and "belongs to jetson:/sys/devices/other" in err
    assert jetson() == DEFAULT  # (already restored by the with block above)


# -- 4. the daemon is one more owner ---------------------------------------------------------
def _daemon_config(tmp_path: Path, limits: str = "") -> Path:
    sock_dir = tmp_path / "run"
    sock_dir.mkdir(mode=0o700)
    config = tmp_path / "daemon.toml"
    config.write_text(
        textwrap.dedent(
            f"""
            [daemon]
            socket = "{sock_dir / "governor.sock"}"
            [[device]]
            uri = "jetson"
            {limits}
            [device.policy]
            policy = "clock"
            clock_mhz = 510
            """
        )
    )
    return config


def test_the_daemon_refuses_a_device_a_live_governor_holds(jetson, governed, tmp_path):
    child = governed(408)
    config = _daemon_config(tmp_path)
    done = _cli("daemon", "--config", str(config), timeout=60)
    assert done.returncode == 1
    assert f"pid {child.pid}" in done.stderr and "Traceback" not in done.stderr
    assert jetson() == (408000000, 408000000)
    assert [layer["owner"]["pid"] for layer in layers()] == [child.pid]


def test_the_daemon_refuses_limits_that_hold_no_clock_as_its_check_does(jetson, tmp_path):
    config = _daemon_config(tmp_path, limits="min_mhz = 2000.0\n            max_mhz = 3000.0")
    checked = _cli("daemon", "--config", str(config), "--check")
    done = _cli("daemon", "--config", str(config), timeout=60)
    assert checked.returncode == done.returncode == 1
    assert checked.stderr.startswith(f"governor: error: {config}: device[0]: jetson supports")
    assert checked.stderr.count("\n") == 1
    # the check says what the daemon refuses (the daemon's log may say it stopped before)
    assert done.stderr.splitlines()[-1] == checked.stderr.strip()
    assert "Traceback" not in done.stderr
    assert jetson() == DEFAULT and journals() == []  # nothing taken, nothing changed
    assert not (tmp_path / "run" / "governor.sock").exists()


def test_the_daemon_holds_the_lock_and_restores_a_dead_governors_layer(jetson, governed, tmp_path):
    child = governed(408)
    _kill9(child)
    config = _daemon_config(tmp_path)
    daemon = subprocess.Popen(
        [sys.executable, "-m", "governor", "daemon", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    try:
        for _ in range(600):  # until the daemon enforces its policy
            if jetson() == (510000000, 510000000) or daemon.poll() is not None:
                break
            time.sleep(0.05)
        assert jetson() == (510000000, 510000000), daemon.stderr.read()
        busy = _cli("run", "--device", "jetson", "--policy", "max", "--", "true")
        assert busy.returncode == 1 and "governor daemon" in busy.stderr
        assert jetson() == (510000000, 510000000)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=30)
    err = daemon.stderr.read()
    assert f"pid {child.pid}" in err  # it said whose settings it restored
    assert jetson() == DEFAULT and journals() == []


# -- 5. journals you can recover from ------------------------------------------------------------
@pytest.mark.parametrize(
    "garbage",
    [
        b"{not json",
        b"",
        b'{"format": "governor-journal", "version": 2}',
        "\u00e9".encode("latin-1"),
    ],
)
def test_a_corrupt_journal_is_set_aside_and_reset_restores_defaults(jetson, capsys, garbage):
    with governor.open_device("jetson") as dev:
        dev.lock_gpu_clocks(510)
        (path,) = state_dir().glob("journal-*.json")
        _crash(dev)
    assert jetson() == (510000000, 510000000)
    path.write_bytes(garbage)

    code, _, err = run_cli(capsys, "devices", "--json")  # reading is not blocked
    assert code == 0, err
    code, out, err = run_cli(capsys, "reset", "--device", "jetson", "--json")
    assert code == 0, err
    report = json.loads(out)["devices"][0]
    assert "corrupt" in report["notes"][0] and "moved to" in report["notes"][0]
    assert jetson() == jetson.defaults()  # the ends of available_frequencies
    assert not path.exists()
    assert list(state_dir().glob(path.name + ".corrupt-*"))  # kept for a human to read


def test_a_corrupt_journal_does_not_block_the_next_governor(jetson, capsys):
    with governor.open_device("jetson") as dev:
        dev.lock_gpu_clocks(510)
        (path,) = state_dir().glob("journal-*.json")
        _crash(dev)
    path.write_text('{"truncated": ')
    code, out, err = run_cli(capsys, "apply", "--device", "jetson", "--clock", "408", "--json")
    assert code == 0, err
    assert "corrupt" in err and "moved to" in err
    assert jetson() == (408000000, 408000000)
    code, _, _ = run_cli(capsys, "reset", "--device", "jetson")
    assert code == 0
    assert jetson() == jetson.defaults()  # the apply's original was lost with the journal


def test_reset_tries_every_field_and_keeps_the_failures(jetson, capsys, monkeypatch):
    code, _, err = run_cli(capsys, "apply", "--device", "jetson", "--clock", "510")
    assert code == 0, err
    with governor.open_device("jetson") as dev:  # a persistent mode change too
        dev.acquire()
        dev.set_power_mode("MODE_15W")
        dev.release(keep=True)
    assert (jetson.bin / "nvpmodel.state").read_text() == "1"
    monkeypatch.setenv("FAKE_NVPMODEL_DENY", "1")
    code, out, err = run_cli(capsys, "reset", "--device", "jetson", "--json")
    assert code == 1
    report = json.loads(out)["devices"][0]
    assert set(report["failed"]) == {"power_mode"}
    assert report["restored"] == {"gpu_clocks": [306.0, 612.0]}
    assert jetson() == DEFAULT  # the clock came back although the mode did not
    assert [layer["original"] for layer in layers()] == [{"power_mode": "MODE_30W"}]
    monkeypatch.delenv("FAKE_NVPMODEL_DENY")
    code, out, err = run_cli(capsys, "reset", "--device", "jetson", "--json")
    assert code == 0, err
    assert (jetson.bin / "nvpmodel.state").read_text() == "2" and journals() == []


def test_reset_all_restores_every_journaled_device(jetson, capsys):
    assert run_cli(capsys, "apply", "--device", "jetson", "--clock", "510")[0] == 0
    code, out, err = run_cli(capsys, "reset", "--all", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert [d["device"] for d in doc["devices"]] == ["jetson"] and doc["ok"]
    assert jetson() == DEFAULT and journals() == []


def test_a_device_reporting_nonsense_is_not_changed(jetson):
    (jetson.node / "max_freq").write_text("nan\n")
    with governor.open_device("jetson") as dev:
        with pytest.raises(GovernorError):
            dev.lock_gpu_clocks(510)
    assert (jetson.node / "min_freq").read_text().strip() == "306000000"
    assert journals() == []


# -- 8. planted links ---------------------------------------------------------------------------
def test_a_planted_symlink_at_the_lock_path_is_refused(jetson, tmp_path, capsys):
    from governor.devices.lock import lock_path

    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    key = "jetson:" + os.path.realpath(jetson.node)
    state_dir().mkdir(parents=True, exist_ok=True)
    lock_path(key).symlink_to(victim)
    code, _, err = run_cli(capsys, "apply", "--device", "jetson", "--clock", "510")
    assert code == 1 and "symbolic link" in err and err.count("\n") == 1
    assert victim.read_text() == "precious\n"
    assert jetson() == DEFAULT


def test_a_state_dir_others_can_write_is_refused(jetson, capsys):
    state_dir().mkdir(parents=True, exist_ok=True)
    state_dir().chmod(0o777)
    code, _, err = run_cli(capsys, "apply", "--device", "jetson", "--clock", "510")
    assert code == 1 and "writable by others" in err
    assert jetson() == DEFAULT


# -- signals ------------------------------------------------------------------------------------
def test_sigterm_restores_the_jetson_files(jetson, governed):
    child = governed(510)
    assert jetson() == (510000000, 510000000)
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=30) == 128 + signal.SIGTERM
    assert jetson() == DEFAULT and journals() == []


def test_simulated_boards_own_no_hardware():
    a = governor.open_device("sim:agx-orin")
    b = governor.open_device("sim:agx-orin")
    with Governor(a, {"policy": "max"}, background=False), Governor(
        b, {"policy": "clock", "clock_mhz": 918}, background=False
    ):
        assert a.state().gpu_clocks_mhz != b.state().gpu_clocks_mhz
    a.close()
    b.close()
    assert not state_dir().exists() or not list(state_dir().iterdir())  # no lock, no journal


def test_the_journal_reaches_the_disk_before_the_write(jetson, monkeypatch):
    from governor.devices.jetson.sysfs import GpuDevfreq

    seen = []
    original = GpuDevfreq.set_caps_mhz

    def spy(self, lo, hi):
        seen.append([layer["original"] for layer in layers()])  # at the moment of the write
        return original(self, lo, hi)

    monkeypatch.setattr(GpuDevfreq, "set_caps_mhz", spy)
    with governor.open_device("jetson") as dev:
        dev.lock_gpu_clocks(408, 510)
    assert seen[0] == [{"gpu_clocks": [306.0, 612.0]}]  # a kill -9 here could be undone
    assert jetson() == DEFAULT and journals() == []


def test_a_second_governor_in_the_same_process_gets_busy_naming_the_holder(jetson):
    first, second = governor.open_device("jetson"), governor.open_device("jetson")
    with Governor(first, {"policy": "max"}, background=False):
        with pytest.raises(DeviceBusyError, match=f"pid {os.getpid()}"):
            Governor(second, {"policy": "clock", "clock_mhz": 306}, background=False).start()
        assert jetson() == (612000000, 612000000)  # the first governor's clock, untouched
    with Governor(second, {"policy": "max"}, background=False):  # free again
        pass
    first.close()
    second.close()
    assert jetson() == DEFAULT


# -- reset: every path reported, nothing guessed -------------------------------------------------
def test_reset_refuses_while_a_governor_runs(jetson, governed, capsys):
    child = governed(408)
    code, _, err = run_cli(capsys, "reset", "--device", "jetson")
    assert code == 1 and f"already governed by pid {child.pid}" in err and err.count("\n") == 1
    assert jetson() == (408000000, 408000000)
    assert [layer["owner"]["pid"] for layer in layers()] == [child.pid]
    code, _, err = run_cli(capsys, "reset", "--all")
    assert code == 1 and f"pid {child.pid}" in err
    assert jetson() == (408000000, 408000000)


def _foreign_journal(key: str, uri: str, kind: str, original: dict) -> Path:
    from governor.devices.journal import Journal, Layer, write_journal
    from governor.devices.ownership import journal_path

    state_dir().mkdir(parents=True, exist_ok=True)
    layer = Layer(owner={"pid": 1, "command": "governor apply"}, persistent=True, original=original)
    path = journal_path(key)
    write_journal(path, Journal(key, uri, kind, [layer]))
    return path


def test_reset_all_reports_each_journal_it_cannot_use_and_resets_the_rest(jetson, capsys):
    assert run_cli(capsys, "apply", "--device", "jetson", "--clock", "510")[0] == 0
    corrupt = state_dir() / "journal-0000-unknown.json"  # sorts first: the rest must go on
    corrupt.write_text("{broken")
    gone = _foreign_journal("nvml:GPU-gone", "nvml:0", "nvml", {"power_limit": 250.0})
    other = _foreign_journal(
        "jetson:/sys/devices/other/devfreq/gpu", "jetson", "jetson", {"gpu_clocks": None}
    )
    code, out, err = run_cli(capsys, "reset", "--all", "--json")
    assert code == 1
    by_device = {}
    for report in json.loads(out)["devices"]:
        by_device.setdefault(report["device"], []).append(report)
    assert "journal" in by_device[corrupt.name][0]["failed"]
    assert "open" in by_device["nvml:GPU-gone"][0]["failed"]  # reopened by its UUID, not nvml:0
    jetson_reports = by_device["jetson"]
    assert any("identity" in r["failed"] for r in jetson_reports)
    assert any(r["restored"] == {"gpu_clocks": [306.0, 612.0]} for r in jetson_reports)
    assert jetson() == DEFAULT
    assert corrupt.exists() and gone.exists() and other.exists()  # nothing guessed at


def test_a_field_that_fails_stays_journaled_for_reset_not_for_the_next_owner(
    jetson, capsys, monkeypatch
):
    assert run_cli(capsys, "apply", "--device", "jetson", "--clock", "510")[0] == 0
    with governor.open_device("jetson") as dev:
        dev.acquire()
        dev.set_power_mode("MODE_15W")
        dev.release(keep=True)
    monkeypatch.setenv("FAKE_NVPMODEL_DENY", "1")
    assert run_cli(capsys, "reset", "--device", "jetson")[0] == 1
    (layer,) = layers()
    assert layer["persistent"] is True and layer["original"] == {"power_mode": "MODE_30W"}
    # a new owner leaves it alone (it is reset's to retry), and its own layer works as usual
    with governor.open_device("jetson") as dev:
        dev.lock_gpu_clocks(408)
        assert [entry["persistent"] for entry in layers()] == [True, False]
    assert jetson() == DEFAULT and [entry["original"] for entry in layers()] == [
        {"power_mode": "MODE_30W"}
    ]


def test_defaults_that_cannot_be_written_are_reported(jetson, capsys, monkeypatch):
    from governor.devices.jetson.sysfs import GpuDevfreq

    with governor.open_device("jetson") as dev:
        dev.lock_gpu_clocks(510)
        (path,) = state_dir().glob("journal-*.json")
        _crash(dev)
    path.write_text("garbage")

    def refuse(self, lo, hi):
        raise PermissionError("read-only file system")

    monkeypatch.setattr(GpuDevfreq, "set_caps_mhz", refuse)
    code, out, err = run_cli(capsys, "reset", "--device", "jetson", "--json")
    assert code == 1
    report = json.loads(out)["devices"][0]
    assert "read-only" in report["failed"]["gpu_clocks"] and "corrupt" in report["notes"][0]
    assert jetson() == (510000000, 510000000)


def test_the_note_names_the_dead_owners_command(jetson, governed, capsys):
    child = governed(408)
    _kill9(child)
    code, _, err = run_cli(capsys, "apply", "--device", "jetson", "--clock", "510")
    assert code == 0
    assert f"pid {child.pid} (" in err and "-c" in err  # the command line it ran
    assert run_cli(capsys, "reset", "--device", "jetson")[0] == 0


def test_repeated_keeps_merge_into_one_layer_with_the_true_original(jetson):
    for clock in (510, 408, 612):
        dev = governor.open_device("jetson")
        dev.acquire(command="governor apply")
        dev.lock_gpu_clocks(clock)
        dev.release(keep=True)
        dev.close()
    assert jetson() == (612000000, 612000000)
    (layer,) = layers()
    assert layer["persistent"] and layer["original"] == {"gpu_clocks": [306.0, 612.0]}


def test_lock_and_journal_files_are_private(jetson):
    import stat as stat_module

    with governor.open_device("jetson") as dev:
        dev.lock_gpu_clocks(510)
        files = sorted(state_dir().iterdir())
        assert {p.name.split("-")[0] for p in files} == {"lock", "journal"}
        for path in files:
            assert stat_module.S_IMODE(path.stat().st_mode) == 0o600, path
        assert stat_module.S_IMODE(state_dir().stat().st_mode) == 0o700
