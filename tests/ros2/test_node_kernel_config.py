"""A power cap set through the node's parameters moves the kernel configuration the app reads
(Governor.kernel_config) across a boundary of the board's table, and back."""

from __future__ import annotations

from ros_helpers import wait_for

from governor.kernels.operating_points import ConfigTable, KernelConfig, save_table

SMALL = KernelConfig({"i": 16, "j": 256}, (256, 1, 1), 39, 0, kernel="jacobi-2d")
LARGE = KernelConfig({"i": 32, "j": 32}, (32, 8, 1), 39, 0, kernel="jacobi-2d")


def test_a_cap_parameter_moves_the_kernel_configuration(ros, board):
    from governor.ros2 import GovernorNode

    clocks = tuple(board.supported_clocks_mhz())
    # LARGE only at the top clock: any cap that holds the board below it crosses the boundary
    index = tuple(1 if c == clocks[-1] else 0 for c in clocks)
    save_table(ConfigTable("jacobi-2d", "orin-nano", "double", clocks, (SMALL, LARGE), index))
    node = ros.add(GovernorNode(board, "max", context=ros.context))
    probe = ros.probe()
    seen = []
    wait_for(lambda: node.governor is not None and node.governor.applied_clock_mhz, what="a clock")
    gov = node.governor
    wait_for(lambda: gov.kernel_config("jacobi-2d").value == LARGE, what="the top clock's config")
    gov.on_kernel_config_change(lambda kernel, config: seen.append(config))
    generation = gov.kernel_config_generation

    assert probe.set_parameters(policy="power-cap", cap_w=6)[0].successful
    wait_for(lambda: gov.kernel_config("jacobi-2d").value == SMALL, what="the capped config")
    assert gov.applied_clock_mhz < clocks[-1]
    assert gov.kernel_config_generation > generation and seen[-1] == SMALL

    assert probe.set_parameters(policy="max")[0].successful
    wait_for(lambda: gov.kernel_config("jacobi-2d").value == LARGE, what="the config back")
    assert seen[-1] == LARGE and node.governor is gov
