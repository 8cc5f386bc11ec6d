"""``governor run``: a policy's missing or clashing options are usage errors (exit 2) that name
the command line's options, never the Python field names, for every policy of the registry."""

from __future__ import annotations

import pytest
from cli_helpers import run_cli

from governor.cli.run import POLICY_FLAGS
from governor.paths import state_dir
from governor.runtime import policies

#: a valid value for each option a policy field is given by
VALUES = {
    "--cap-w": "5",
    "--clock": "900",
    "--rate-hz": "30",
    "--battery-wh": "1",
    "--hours": "1",
    "--until": "18:00",
    "--scope": "board",
}


def _cases():
    """(policy, options given, the options the message must name) for each required field
    and each field rule of every policy, each broken alone."""
    for name, kind in policies.POLICIES.items():
        required = [POLICY_FLAGS[key] for key in kind.required]
        for key in kind.required:
            given = [flag for flag in required if flag != POLICY_FLAGS[key]]
            yield pytest.param(name, given, [POLICY_FLAGS[key]], id=f"{name}-needs-{key}")
        for i, rule in enumerate(kind.policy.rules):
            flags = sorted({POLICY_FLAGS[f] for f in rule.fields if f in POLICY_FLAGS})
            if rule.at_most and len(flags) < 2:
                continue  # one option cannot be given twice
            trigger = [
                POLICY_FLAGS[f] for f in rule.when if f in POLICY_FLAGS and f not in rule.fields
            ]
            given = required + trigger[:1] if rule.when else list(required)
            if rule.at_most:
                given += flags
            yield pytest.param(name, given, flags, id=f"{name}-rule{i}")


def test_every_field_a_rule_or_requirement_names_has_an_option():
    for name, kind in policies.POLICIES.items():
        for key in kind.required:
            assert key in POLICY_FLAGS, f"{name}: required field {key} has no option"
        for rule in kind.policy.rules:
            assert any(f in POLICY_FLAGS for f in rule.fields), f"{name}: {rule} has no option"


def test_the_options_exist(capsys):
    code, out, _ = run_cli(capsys, "run", "--help")
    assert code == 0
    for flag in set(POLICY_FLAGS.values()):
        assert flag in out


@pytest.mark.parametrize("policy, given, named", list(_cases()))
def test_missing_or_clashing_options_are_usage_errors_naming_the_options(
    capsys, tmp_path, policy, given, named
):
    marker = tmp_path / "ran"
    args = ["run", "--device", "sim:agx-orin", "--policy", policy]
    for flag in given:
        args += [flag, VALUES[flag]]
    code, out, err = run_cli(capsys, *args, "--", "touch", str(marker))
    assert code == 2, err
    assert err.startswith("governor: error: ") and err.count("\n") == 1
    for flag in named:
        assert flag in err
    fields = {key for kind in policies.POLICIES.values() for key in kind.keys}
    assert not [key for key in fields if "_" in key and key in err], err  # no Python names
    assert not marker.exists()  # the job never ran
    assert not state_dir().exists() or not list(state_dir().glob("journal-*"))


@pytest.mark.parametrize(
    "args, words",
    [
        (["--policy", "clock", "--clock", "900", "--cap-w", "5"], "--cap-w does not apply"),
        (["--policy", "turbo"], "unknown --policy 'turbo'"),
        (["--policy", "clock", "--clock", "900", "--scope", "gpu"], "--scope does not apply"),
        (["--policy", "ppw", "--scope", "board"], "--scope does not apply"),
        (["--policy", "throughput", "--rate-hz", "30", "--scope", "gpu"], "needs --battery-wh"),
        (["--policy", "battery", "--battery-wh", "20"], "exactly one of --hours or --until"),
        (["--policy", "throughput", "--rate-hz", "30"], "gov.tick()"),
        (["--policy", "max", "--kernel", "gemm"], "--kernel goes with --policy ppw"),
    ],
)
def test_other_usage_errors_exit_2(capsys, args, words):
    code, _, err = run_cli(capsys, "run", "--device", "sim:agx-orin", *args, "--", "true")
    assert code == 2 and words in err and err.count("\n") == 1


def test_the_python_api_keeps_the_field_names():
    with pytest.raises(policies.InvalidRequestError, match="needs cap_w"):
        policies.from_spec({"policy": "power-cap"})
    with pytest.raises(policies.InvalidRequestError, match="exactly one of hours or duration_s"):
        policies.from_spec({"policy": "battery", "battery_wh": 20})
    assert policies.spec_problem({"policy": "clock"}, POLICY_FLAGS.get) == (
        "the clock policy needs --clock"
    )
