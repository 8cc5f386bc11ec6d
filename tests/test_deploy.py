"""deploy/: the manifests parse and name what they must (privileges, host paths, the socket,
the NVIDIA runtime), the configs they carry are valid daemon configs, and the files agree
with each other (socket directory, config path, stop signal)."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from governor.runtime.daemon.config import load_config, parse_config

yaml = pytest.importorskip("yaml")

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
SOCKET_DIR = "/run/governor"
CONFIG = "/etc/governor/daemon.toml"


def _docs(name):
    return [d for d in yaml.safe_load_all((DEPLOY / "kubernetes" / name).read_text()) if d]


def _daemonsets():
    return {
        d["metadata"]["name"]: d
        for d in _docs("governor-daemonset.yaml")
        if d["kind"] == "DaemonSet"
    }


def test_the_daemonset_file_holds_namespace_config_and_both_daemonsets():
    kinds = sorted(d["kind"] for d in _docs("governor-daemonset.yaml"))
    assert kinds == ["ConfigMap", "DaemonSet", "DaemonSet", "Namespace"]
    assert set(_daemonsets()) == {"governor-datacenter", "governor-jetson"}


@pytest.mark.parametrize("name", ["governor-datacenter", "governor-jetson"])
def test_each_daemonset_is_privileged_with_sys_run_and_state_from_the_host(name):
    ds = _daemonsets()[name]
    spec = ds["spec"]["template"]["spec"]
    assert (
        ds["spec"]["selector"]["matchLabels"].items()
        <= ds["spec"]["template"]["metadata"]["labels"].items()
    )
    assert spec["runtimeClassName"] == "nvidia"
    assert spec["terminationGracePeriodSeconds"] >= 10  # time to restore on SIGTERM
    (container,) = spec["containers"]
    assert container["securityContext"]["privileged"] is True
    assert container["command"] == ["governor", "daemon", "--config", CONFIG]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["GOVERNOR_STATE_DIR"] == "/var/lib/governor"
    host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    for path in ("/sys", SOCKET_DIR, "/var/lib/governor"):
        (volume,) = [n for n, p in host.items() if p == path]
        assert mounts[volume]["mountPath"] == path
    config_mount = [m for m in mounts.values() if m["mountPath"] == CONFIG]
    assert config_mount and config_mount[0]["readOnly"] is True
    if name == "governor-datacenter":
        assert env["NVIDIA_VISIBLE_DEVICES"] == "all"  # sees every GPU without claiming one
        assert "nvidia.com/gpu" not in str(container.get("resources"))
        assert spec["nodeSelector"]["nvidia.com/gpu.present"] == "true"
    else:
        assert spec["nodeSelector"]["kubernetes.io/arch"] == "arm64"
        assert "/usr/sbin/nvpmodel" in host.values() and "/etc/nvpmodel.conf" in host.values()


def test_the_configmap_carries_valid_daemon_configs_whose_socket_is_the_mounted_one():
    (cm,) = [d for d in _docs("governor-daemonset.yaml") if d["kind"] == "ConfigMap"]
    used = {
        m["subPath"]
        for ds in _daemonsets().values()
        for m in ds["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
        if m.get("subPath")
    }
    assert used == set(cm["data"]) == {"daemon.toml", "jetson.toml"}
    for key, text in cm["data"].items():
        cfg = parse_config(text, key)
        assert str(cfg.socket.parent) == SOCKET_DIR and cfg.socket_group == "2000"
    assert parse_config(cm["data"]["jetson.toml"], "j").devices[0].uri == "jetson"


def test_the_client_pod_example_uses_the_socket_as_a_non_root_group_member():
    (pod,) = _docs("client-pod-example.yaml")
    spec = pod["spec"]
    assert (
        spec["securityContext"]["runAsNonRoot"] is True
        and 2000 in spec["securityContext"]["supplementalGroups"]
    )
    (container,) = spec["containers"]
    assert {"name": "GOVERNOR_DAEMON_SOCKET", "value": SOCKET_DIR + "/governor.sock"} in container[
        "env"
    ]
    assert [v["hostPath"]["path"] for v in spec["volumes"]] == [SOCKET_DIR]
    assert "governor daemon reset" in container["command"][-1]


@pytest.mark.parametrize(
    "name, base",
    [
        ("Dockerfile.datacenter", r"nvidia/cuda:[\w.-]+"),
        ("Dockerfile.jetson", r"nvcr.io/nvidia/l4t-base:\$\{L4T\}"),
    ],
)
def test_dockerfiles_build_from_the_right_base_and_run_the_daemon(name, base):
    text = (DEPLOY / "docker" / name).read_text()
    lines = [
        line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")
    ]
    assert re.fullmatch(r"FROM " + base, [x for x in lines if x.startswith("FROM")][0])
    assert "STOPSIGNAL SIGTERM" in lines
    assert f'ENTRYPOINT ["governor", "daemon", "--config", "{CONFIG}"]' in lines
    assert any(x.startswith("COPY governor ") for x in lines) and any(
        "pip install" in x for x in lines
    )
    if name.endswith("jetson"):
        assert "ARG L4T=r36.2.0" in lines and "GOVERNOR_SYSFS_ROOT=/" in text


def _unit(path):
    """systemd unit as {section: {key: [values]}} (keys may repeat)."""
    sections, current = {}, None
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def test_the_systemd_unit_runs_the_daemon_as_root_and_stops_it_with_sigterm():
    unit = _unit(DEPLOY / "systemd" / "governor-daemon.service")
    service = unit["Service"]
    assert service["ExecStart"] == [f"/usr/local/bin/governor daemon --config {CONFIG}"]
    assert service["ExecStartPre"][0].endswith("--check")
    assert service["KillSignal"] == ["SIGTERM"] and service["User"] == ["root"]
    assert service["RuntimeDirectory"] == ["governor"] and service["RuntimeDirectoryMode"] == [
        "0755"
    ]
    assert "GOVERNOR_STATE_DIR=/var/lib/governor" in service["Environment"]
    assert "ProtectKernelTunables" not in service  # it would make /sys read-only
    assert unit["Install"]["WantedBy"] == ["multi-user.target"]
    assert "g governor" in (DEPLOY / "systemd" / "governor.sysusers.conf").read_text()


def test_the_example_config_matches_the_unit_and_the_udev_rule_names_the_group():
    cfg = load_config(DEPLOY / "governor-daemon.toml")
    assert str(cfg.socket.parent) == SOCKET_DIR and cfg.socket_group == "governor"
    rules = (DEPLOY / "udev" / "99-governor.rules").read_text()
    assert 'SUBSYSTEM=="devfreq"' in rules and "chgrp governor" in rules


def test_slurm_scripts_are_executable_bash_and_the_example_conf_names_known_settings():
    from governor.fleet.slurm import SETTINGS

    for name in ("prolog.sh", "epilog.sh", "governor-slurm.sh"):
        path = DEPLOY / "slurm" / name
        assert path.read_text().startswith("#!/usr/bin/env bash\n")
        assert os.stat(path).st_mode & stat.S_IXUSR
    script = (DEPLOY / "slurm" / "governor-slurm.sh").read_text()
    code = "\n".join(line for line in script.splitlines() if not line.lstrip().startswith("#"))
    assert not re.search(
        r"\beval\b|^\s*(source|\.)\s", code, re.MULTILINE
    )  # settings are read, never run
    for line in (DEPLOY / "slurm" / "slurm.conf.example").read_text().splitlines():
        if line and not line.startswith("#"):
            assert line.split("=", 1)[0] in set(SETTINGS) | {"GOVERNOR_BIN"}


@pytest.mark.parametrize("name", ["governor-datacenter", "governor-jetson"])
def test_each_daemonset_calibrates_new_boards_once_into_the_hosts_profile_dir(name):
    spec = _daemonsets()[name]["spec"]["template"]["spec"]
    (init,) = spec["initContainers"]
    assert "--if-missing" in init["command"][-1]
    for container in (init, spec["containers"][0]):
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env["GOVERNOR_DATA_DIR"] == "/var/lib/governor"  # profiles go in its profiles/
        assert "/var/lib/governor" in {m["mountPath"] for m in container["volumeMounts"]}
    assert spec["containers"][0]["ports"] == [{"name": "metrics", "containerPort": 9400}]


def test_the_datacenter_config_serves_every_gpu_and_metrics():
    (cm,) = [d for d in _docs("governor-daemonset.yaml") if d["kind"] == "ConfigMap"]
    cfg = parse_config(cm["data"]["daemon.toml"], "daemon.toml")
    assert [d.uri for d in cfg.devices] == ["all"] and cfg.metrics_listen == "0.0.0.0:9400"
    unit = _unit(DEPLOY / "systemd" / "governor-daemon.service")["Service"]
    assert any("calibrate --device all --if-missing" in x for x in unit["ExecStartPre"])
    assert "GOVERNOR_DATA_DIR=/var/lib/governor" in unit["Environment"]


def test_the_grafana_dashboard_queries_only_series_the_exporter_serves():
    import json

    doc = json.loads((DEPLOY / "grafana" / "governor-dashboard.json").read_text())
    served = {
        "governor_device_up",
        "governor_power_watts",
        "governor_energy_joules_total",
        "governor_clock_hertz",
        "governor_temperature_celsius",
        "governor_utilisation_ratio",
        "governor_policy_info",
        "governor_budget_remaining_joules",
    }
    exprs = [t["expr"] for p in doc["panels"] for t in p["targets"]]
    exprs += [v["query"] for v in doc["templating"]["list"] if v["type"] == "query"]
    named = {m for e in exprs for m in re.findall(r"\bgovernor_[a-z_]+", e)}
    assert named and named <= served, named - served
    source = (DEPLOY.parent / "governor" / "runtime" / "exporter.py").read_text()
    for name in served:  # and the exporter really serves them (a counter adds _total)
        assert f'"{name.replace("_total", "")}"' in source, name


# The real validators: Kubernetes' own OpenAPI schemas (kubernetes-validate ships them per
# release) and systemd's unit parser. The tests above check what the files say; these check
# that a cluster and systemd would take them at all (a misspelt field is silently dropped by
# a lenient parser, refused by the strict schema).
K8S_VERSIONS = ("1.25.0", "1.37.0")  # the oldest and newest schemas the validator ships


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("name", ["governor-daemonset.yaml", "client-pod-example.yaml"])
def test_each_kubernetes_manifest_passes_the_api_schema_strictly(name, version):
    validator = pytest.importorskip("kubernetes_validate.utils")
    docs = _docs(name)
    assert docs
    for doc in docs:
        validator.validate(doc, version, strict=True)


def test_the_strict_schema_refuses_a_misspelt_field_the_yaml_parser_takes():
    validator = pytest.importorskip("kubernetes_validate.utils")
    ds = _daemonsets()["governor-datacenter"]
    container = ds["spec"]["template"]["spec"]["containers"][0]
    container["securityContex"] = container.pop("securityContext")
    with pytest.raises(validator.ValidationError, match="securityContex"):
        validator.validate(ds, K8S_VERSIONS[-1], strict=True)


def _systemd_verify(tmp_path, text, name="governor-daemon.service"):
    """``systemd-analyze verify`` of the unit ``text`` with the governor command pointed at
    an executable that exists here (systemd checks it); its complaints, one per line."""
    import shutil
    import subprocess
    import sys

    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (.ci/run installs systemd as root)")
    governor_bin = Path(sys.executable).with_name("governor")
    unit = tmp_path / name
    unit.write_text(
        text.replace("/usr/local/bin/governor", str(governor_bin)).replace(
            "/usr/bin/ssh", str(governor_bin)
        )
    )
    run = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    lines = (run.stdout + run.stderr).splitlines()
    return run.returncode, [line for line in lines if unit.name in line]


def test_systemd_accepts_the_unit_without_a_complaint(tmp_path):
    text = (DEPLOY / "systemd" / "governor-daemon.service").read_text()
    assert _systemd_verify(tmp_path, text) == (0, [])


def test_systemd_verify_names_a_bad_setting_in_the_unit(tmp_path):
    text = (DEPLOY / "systemd" / "governor-daemon.service").read_text()
    _, complaints = _systemd_verify(tmp_path, text.replace("SIGTERM", "SIGTREM"))
    assert any("SIGTREM" in line for line in complaints)


@pytest.mark.parametrize(
    "unit, name",
    [
        ("governor-cluster.service", "governor-cluster.service"),
        ("governor-node-link@.service", "governor-node-link@node1.service"),
    ],
)
def test_systemd_accepts_the_cluster_units_without_a_complaint(tmp_path, unit, name):
    text = (DEPLOY / "systemd" / unit).read_text()
    env = Path("/etc/governor/cluster.env")
    if "EnvironmentFile=/etc" in text and not env.exists():
        text = text.replace(
            "EnvironmentFile=/etc/governor/cluster.env",
            "EnvironmentFile=-/etc/governor/cluster.env",
        )
    assert _systemd_verify(tmp_path, text, name) == (0, [])


def test_the_cluster_unit_is_not_restarted_after_a_refused_budget():
    service = _unit(DEPLOY / "systemd" / "governor-cluster.service")["Service"]
    assert service["RestartPreventExitStatus"] == ["2"]  # the least budget, said in one line
    assert "--budget-w ${GOVERNOR_CLUSTER_BUDGET_W}" in service["ExecStart"][0]
    assert "/run/governor/nodes/{node}.sock" in service["ExecStart"][0]
    link = _unit(DEPLOY / "systemd" / "governor-node-link@.service")["Service"]
    assert "-L /run/governor/nodes/%i.sock:/run/governor/governor.sock" in link["ExecStart"][0]
