"""EATSS: the formulation, the exact solver against brute force, validation, infeasible cases.

The brute force here is a plain re-reading of the formulation (docs/tiles.md), written apart
from the library's code, so a mistake in either shows up as a disagreement.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Dict, List, Optional, Sequence, Tuple

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from governor.errors import DeviceNotFoundError, InvalidRequestError
from governor.tuning import eatss
from governor.tuning.eatss import GpuResources, Kernel, Reference

# --------------------------------------------------------------------------- the oracle


class Oracle:
    """The formulation read straight from the spec, with exact rationals and no shortcuts."""

    def __init__(
        self, kernel: Kernel, gpu: GpuResources, s: float, w: float, prec: str, bound: str
    ):
        p = 2 if prec == "double" else 1
        self.kernel = kernel
        tpw = Fraction(gpu.threads_per_warp, p)
        tpb = Fraction(gpu.threads_per_block, p)
        rps = Fraction(gpu.registers_per_sm, p)
        self.l1 = Fraction(gpu.l1_bytes, 4 * p)
        self.l2 = Fraction(gpu.l2_bytes, 4 * p)
        self.shpb = Fraction(gpu.shared_per_block_bytes, 4 * p)
        if gpu.shared_per_sm_bytes is None:  # one pool: shared memory is carved out of L1
            self.sh = math.floor(self.l1 * Fraction(repr(s)))
            self.cache_cap = self.l1 - self.sh
        else:  # separate shared memory (Maxwell, Pascal): the L1 cache keeps its size
            self.sh = math.floor(Fraction(gpu.shared_per_sm_bytes, 4 * p) * Fraction(repr(s)))
            self.cache_cap = self.l1
        self.align = math.floor(Fraction(repr(w)) * tpw)
        self.p = p
        loops = kernel.loops
        self.domains: List[List[int]] = []
        for d in loops:
            if self.align < 1:
                self.domains.append([])
                continue
            ext = next((e for r in kernel.refs for i, e in zip(r.index, r.extent) if i == d), None)
            if bound == "paper" and ext is not None and ext < self.align:
                self.domains.append([ext])
                continue
            top = tpb if bound == "artifact" or ext is None else min(tpb, ext)
            self.domains.append([v for v in range(1, int(top) + 1) if v % self.align == 0])
        self.c = {
            d: sum(1 for r in kernel.refs if len(r.index) >= 2 and r.index[-1] == d) for d in loops
        }
        best = max(self.c.values())
        self.ls1 = next(d for d in loops if self.c[d] == best) if best > 0 else None
        self.cache = [r for r in kernel.refs if len(r.index) >= 2 and r.index[-1] == self.ls1]
        self.shared = [r for r in kernel.refs if r not in self.cache or self.ls1 is None]
        self.n_refs = len({r.array for r in kernel.refs})
        self.rps = rps
        self.h = {
            d: (self.c[d] - (1 if d in kernel.parallel else 0))
            * self.c[d]
            * (self.align if d == self.ls1 else 1)
            for d in loops
        }

    def objective(self, tiles: Dict[str, int]) -> int:
        b = math.prod(tiles[d] for d in self.kernel.parallel)
        return b + sum(self.h[d] * tiles[d] for d in self.kernel.loops)

    def feasible(self, tiles: Dict[str, int]) -> bool:
        def vol(ref: Reference) -> int:
            return math.prod(tiles[d] for d in set(ref.index))

        m_sh = sum(vol(r) for r in self.shared)
        m_c = sum(vol(r) for r in self.cache)
        b = math.prod(tiles[d] for d in self.kernel.parallel)
        if self.sh > 0 and self.shared and (m_sh > self.sh or m_sh > self.shpb):
            return False
        if self.cache_cap > 0 and m_c > self.cache_cap:
            return False
        if m_c > self.l2:
            return False
        if b > self.rps / (self.p * self.n_refs):
            return False
        w = self.objective(tiles)
        return all(w >= tiles[d] for d in self.kernel.loops)

    def in_domain(self, tiles: Dict[str, int]) -> bool:
        return all(tiles[d] in dom for d, dom in zip(self.kernel.loops, self.domains))

    def solvable(self) -> bool:
        return self.ls1 is not None and self.align >= 1 and self.sh <= self.shpb

    def all_values(self) -> List[Tuple[int, Dict[str, int]]]:
        """Every feasible configuration with its objective, best first."""
        out = []
        for combo in itertools.product(*self.domains):
            tiles = dict(zip(self.kernel.loops, combo))
            if self.feasible(tiles):
                out.append((self.objective(tiles), tiles))
        out.sort(key=lambda x: -x[0])
        return out

    def size(self) -> int:
        return math.prod(len(d) for d in self.domains)


# --------------------------------------------------------------------------- strategies

LOOP_NAMES = ("i", "j", "k", "l")


@st.composite
def kernels(draw, max_loops: int = 3) -> Kernel:
    n = draw(st.integers(1, max_loops))
    loops = LOOP_NAMES[:n]
    parallel = tuple(d for d in loops if draw(st.booleans()))
    refs = []
    for r in range(draw(st.integers(1, 4))):
        ndim = 2 if r == 0 else draw(st.integers(1, min(3, n + 1)))
        index = tuple(draw(st.sampled_from(loops)) for _ in range(ndim))
        extent = tuple(draw(st.sampled_from((2, 3, 8, 12, 40, 64))) for _ in range(ndim))
        refs.append(
            Reference(
                array=draw(st.sampled_from(("A", "B", "C", f"R{r}"))), index=index, extent=extent
            )
        )
    return Kernel(name="k", loops=loops, parallel=parallel, refs=tuple(refs))


@st.composite
def small_gpus(draw) -> GpuResources:
    tpw = draw(st.sampled_from((4, 8, 16, 32)))
    l1_bytes = draw(st.integers(64, 65536))
    separate = draw(st.one_of(st.none(), st.integers(64, 65536)))  # Maxwell/Pascal shared
    return GpuResources(
        name="tiny",
        shared_per_sm_bytes=separate,
        threads_per_warp=tpw,
        threads_per_block=draw(st.sampled_from((tpw, 2 * tpw, 32, 48))),
        registers_per_sm=draw(st.integers(16, 16384)),
        l1_bytes=l1_bytes,
        l2_bytes=draw(st.integers(64, 262144)),
        shared_per_block_bytes=draw(st.sampled_from((l1_bytes // 4 + 4, l1_bytes // 2, l1_bytes))),
    )


cases = st.tuples(
    st.sampled_from((0.0, 0.25, 0.5, 1.0)),  # shared fraction
    st.sampled_from((1.0, 0.5, 0.25)),  # warp fraction
    st.sampled_from(("single", "double")),
    st.sampled_from(("paper", "artifact")),
)


# --------------------------------------------------------------------------- worked examples


@pytest.mark.parametrize(
    "kernel, s, expected",
    [("gemm", 0.25, 16160), ("2mm", 0.0, 16176), ("floyd-warshall", 0.0, 32816)],
)
def test_worked_examples_of_the_spec(kernel: str, s: float, expected: int) -> None:
    r = eatss.select_tiles(kernel, "a100", s, 1.0, "double", "artifact")
    assert r.feasible and r.objective == expected
    oracle = Oracle(eatss.find_kernel(kernel), eatss.find_gpu("a100"), s, 1.0, "double", "artifact")
    assert oracle.feasible(r.tiles) and oracle.in_domain(r.tiles)
    assert oracle.objective(r.tiles) == expected


def test_gemm_beats_the_published_selector_and_matches_the_spec_tiles() -> None:
    r = eatss.select_tiles("gemm", "a100", 0.25, 1.0, "double", "artifact")
    assert r.tiles == {"i": 16, "j": 336, "k": 32}
    assert r.objective > 13840  # where the published selector stops
    assert r.coalescing_loop == "j" and r.alignment == 16 and r.parallel_tile_points == 16 * 336


def test_matmul_weights_follow_the_published_rule() -> None:
    prob = eatss.build_problem(
        eatss.find_kernel("gemm"), eatss.find_gpu("a100"), 0.0, 1.0, "double"
    )
    assert dict(zip(prob.loops, prob.weights)) == {"i": 0, "j": 32, "k": 1}


def test_scaling_to_iteration_units_a100_double() -> None:
    prob = eatss.build_problem(
        eatss.find_kernel("gemm"), eatss.find_gpu("a100"), 0.25, 1.0, "double"
    )
    caps = {c.name: c.capacity for c in prob.constraints}
    # L1 = 196608 / 8 = 24576, SH = 6144, L2 = 41943040 / 8, RPS / (p * 3) = 32768 / 6
    assert caps == {
        "shared memory": 6144,
        "L1 cache": 24576 - 6144,
        "L2 cache": 5242880,
        "registers (block size)": 5461,
    }
    assert prob.upper == (512, 512, 512) and prob.step == (16, 16, 16)


def test_paper_bound_leaves_short_loops_untiled() -> None:
    prob = eatss.build_problem(
        eatss.find_kernel("conv-2d"), eatss.find_gpu("a100"), 0.0, 1.0, "double", "paper"
    )
    by_loop = dict(zip(prob.loops, zip(prob.lower, prob.upper, prob.step)))
    assert by_loop["kh"] == (3, 3, 0) and by_loop["kw"] == (3, 3, 0)
    assert by_loop["c"] == (16, 32, 16) and by_loop["h"] == (16, 224, 16)
    r = eatss.select_tiles("conv-2d", "a100", 0.0, 1.0, "double", "paper")
    assert r.tiles["kh"] == 3 and r.tiles["kw"] == 3


def test_single_precision_doubles_the_alignment() -> None:
    r = eatss.select_tiles("gemm", "a100", 0.0, 1.0, "single")
    assert r.alignment == 32 and all(v % 32 == 0 for v in r.tiles.values())


# --------------------------------------------------------------------------- exactness


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(kernel=kernels(), gpu=small_gpus(), case=cases)
def test_solver_matches_brute_force(kernel: Kernel, gpu: GpuResources, case: tuple) -> None:
    s, w, prec, bound = case
    oracle = Oracle(kernel, gpu, s, w, prec, bound)
    assume(oracle.size() <= 3000)
    r = eatss.select_tiles(kernel, gpu, s, w, prec, bound)
    if not oracle.solvable():
        event("no formulation")
        assert not r.feasible and r.reason
        return
    everything = oracle.all_values()
    if not everything:
        event("nothing fits")
        assert not r.feasible and r.reason.startswith("nothing fits")
        return
    event("feasible, %s configurations" % ("> 100" if len(everything) > 100 else "<= 100"))
    assert r.feasible, r.reason
    assert r.objective == everything[0][0]
    assert oracle.in_domain(r.tiles) and oracle.feasible(r.tiles)
    assert oracle.objective(r.tiles) == r.objective


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(kernel=kernels(), gpu=small_gpus(), case=cases, k=st.integers(2, 6))
def test_top_k_matches_brute_force(kernel: Kernel, gpu: GpuResources, case: tuple, k: int) -> None:
    s, w, prec, bound = case
    oracle = Oracle(kernel, gpu, s, w, prec, bound)
    assume(oracle.solvable() and oracle.size() <= 2000)
    r = eatss.select_tiles(kernel, gpu, s, w, prec, bound, top=k)
    # Loops that neither weigh nor belong to the block stay at their smallest tile.
    idle = [
        (d, dom[0])
        for d, dom in zip(kernel.loops, oracle.domains)
        if oracle.h[d] == 0 and d not in kernel.parallel
    ]
    listed = [(v, t) for v, t in oracle.all_values() if all(t[d] == lo for d, lo in idle)]
    if not listed:
        assert not r.feasible
        return
    got = [c.objective for c in r.alternatives]
    assert got == [v for v, _ in listed[:k]]
    assert r.alternatives[0].objective == r.objective
    assert len({tuple(c.tiles.values()) for c in r.alternatives}) == len(got)
    for c in r.alternatives:
        assert oracle.feasible(c.tiles) and oracle.in_domain(c.tiles)


CATALOG = sorted(eatss.builtin_kernels())


@settings(max_examples=150, deadline=None)
@given(
    kernel=st.sampled_from(CATALOG),
    gpu=st.sampled_from(("a100", "xavier", "2080ti")),
    si=st.integers(0, 2),
    w=st.sampled_from(eatss.WARP_FRACTIONS),
    prec=st.sampled_from(("single", "double")),
    bound=st.sampled_from(("paper", "artifact")),
)
def test_catalog_answers_are_feasible_and_locally_maximal(kernel, gpu, si, w, prec, bound) -> None:
    g = eatss.find_gpu(gpu)
    s = g.shared_fractions[si]
    r = eatss.select_tiles(kernel, g, s, w, prec, bound)
    oracle = Oracle(eatss.find_kernel(kernel), g, s, w, prec, bound)
    if not r.feasible:
        assert r.reason
        if oracle.solvable():  # nothing fits: the smallest tiles already break a limit
            smallest = {d: dom[0] for d, dom in zip(oracle.kernel.loops, oracle.domains)}
            assert not oracle.feasible(smallest)
        return
    assert oracle.in_domain(r.tiles) and oracle.feasible(r.tiles)
    assert oracle.objective(r.tiles) == r.objective
    # No feasible neighbour (one or two loops moved by one step) scores higher.
    loops = oracle.kernel.loops
    moves = []
    for d, dom in zip(loops, oracle.domains):
        i = dom.index(r.tiles[d])
        moves.append([dom[j] for j in (i - 1, i + 1) if 0 <= j < len(dom)])
    for a, b in itertools.combinations(range(len(loops)), 2):
        for va in [r.tiles[loops[a]]] + moves[a]:
            for vb in [r.tiles[loops[b]]] + moves[b]:
                t = dict(r.tiles)
                t[loops[a]], t[loops[b]] = va, vb
                if oracle.feasible(t):
                    assert oracle.objective(t) <= r.objective, t
    for d, vals in zip(loops, moves):
        for v in vals:
            t = dict(r.tiles)
            t[d] = v
            if oracle.feasible(t):
                assert oracle.objective(t) <= r.objective, t


def test_every_catalog_case_of_one_gpu_is_answered() -> None:
    results = eatss.select_all("xavier", "double", "artifact")
    assert len(results) == 30 * 3 * 4
    assert all(r.feasible or r.reason for r in results)
    assert sum(r.feasible for r in results) > 300


# --------------------------------------------------------------------------- infeasible


def test_no_coalescing_loop_is_a_reason_not_an_error() -> None:
    r = eatss.select_tiles("durbin", "a100")
    assert not r.feasible and r.tiles is None and r.objective is None
    assert "no coalescing loop" in r.reason
    assert r.to_dict()["error"] == r.reason and "tiles" not in r.to_dict()


def test_nothing_fits_names_the_limit() -> None:
    r = eatss.select_tiles("heat-3d", "xavier", 0.375, 1.0, "double", "paper")
    assert not r.feasible
    assert r.reason.startswith("nothing fits") and "L1 cache" in r.reason


def test_too_much_shared_memory_is_a_reason() -> None:
    gpu = GpuResources("g", 32, 1024, 65536, 196608, 1 << 20, 8192)
    r = eatss.select_tiles("gemm", gpu, 1.0)
    assert not r.feasible and "shared memory" in r.reason


def test_tiny_warp_fraction_is_a_reason() -> None:
    r = eatss.select_tiles("gemm", "a100", 0.0, 0.01)
    assert not r.feasible and "alignment" in r.reason


# --------------------------------------------------------------------------- validation


def ref(array: str, index: Sequence[str], extent: Optional[Sequence[int]] = None) -> Reference:
    return Reference(array, tuple(index), tuple(extent or [64] * len(index)))


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: Kernel("k", (), (), (ref("A", "i"),)), "empty loop nest"),
        (lambda: Kernel("k", ("i", "i"), (), (ref("A", "i"),)), "duplicate loop i"),
        (lambda: Kernel("k", ("i",), (), (ref("A", ["iz"]),)), "unknown iterator 'iz'"),
        (lambda: Kernel("k", ("i",), ("j",), (ref("A", "i"),)), "parallel loop 'j'"),
        (lambda: Kernel("k", ("i",), (), ()), "no array references"),
        (lambda: ref("A", "ij", [64, 0]), "extent 0"),
        (lambda: ref("A", "ij", [64, -3]), "extent -3"),
        (lambda: ref("A", "ij", [64]), "2 indices but 1 extents"),
    ],
)
def test_bad_kernels_are_rejected(build, message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        build()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"shared_fraction": 1.5}, "shared fraction"),
        ({"shared_fraction": -0.1}, "shared fraction"),
        ({"warp_fraction": 0.0}, "warp fraction"),
        ({"warp_fraction": 2.0}, "warp fraction"),
        ({"precision": "half"}, "precision"),
        ({"bound": "loose"}, "bound"),
        ({"top": 0}, "top"),
    ],
)
def test_bad_options_are_rejected(kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        eatss.select_tiles("gemm", "a100", **kwargs)


def test_unknown_names() -> None:
    with pytest.raises(DeviceNotFoundError, match="unknown GPU 'a101'.*a100"):
        eatss.select_tiles("gemm", "a101")
    with pytest.raises(InvalidRequestError, match="unknown kernel 'gemmm'.*gemm"):
        eatss.select_tiles("gemmm", "a100")


def test_catalog_holds_thirty_kernels_and_three_gpus() -> None:
    assert len(eatss.builtin_kernels()) == 30
    assert {"a100", "xavier", "2080ti", "agx-orin", "orin-nano", "t4"} <= set(eatss.builtin_gpus())
    assert eatss.builtin_gpus()["nano"].separate_shared  # Maxwell: L1 and shared are separate


def test_user_files_load_and_bad_files_explain(tmp_path) -> None:
    good = tmp_path / "k.toml"
    good.write_text(
        '[kernel.mine]\nloops = ["i", "j"]\nparallel = ["i"]\n'
        'refs = [{ array = "A", index = ["i", "j"], extent = [100, 100] }]\n'
    )
    mine = eatss.load_kernels(good)["mine"]
    assert eatss.select_tiles(mine, "a100").feasible
    assert eatss.find_kernel("mine", good) == mine
    bad = tmp_path / "bad.toml"
    bad.write_text(
        '[kernel.x]\nloops = ["i"]\nrefs = [{ array = "A", index = ["q"], extent = [4] }]\n'
    )
    with pytest.raises(InvalidRequestError, match="unknown iterator 'q'"):
        eatss.load_kernels(bad)
    broken = tmp_path / "broken.toml"
    broken.write_text("[kernel.x\n")
    with pytest.raises(InvalidRequestError, match="not valid TOML"):
        eatss.load_kernels(broken)
    with pytest.raises(InvalidRequestError, match="cannot read"):
        eatss.load_kernels(tmp_path / "missing.toml")
    gpus = tmp_path / "g.toml"
    gpus.write_text("[gpu.small]\nthreads_per_warp = 32\nthreads_per_block = 256\n")
    with pytest.raises(InvalidRequestError, match="missing registers_per_sm"):
        eatss.load_gpus(gpus)


def test_cuda_properties_become_resources() -> None:
    props = {
        "name": b"NVIDIA A100-SXM4-40GB",
        "major": 8,
        "minor": 0,
        "warpSize": 32,
        "maxThreadsPerBlock": 1024,
        "regsPerMultiprocessor": 65536,
        "l2CacheSize": 41943040,
        "sharedMemPerBlock": 49152,
        "sharedMemPerMultiprocessor": 167936,
    }
    gpu = eatss.gpu_from_cuda_properties(props)
    a100 = eatss.find_gpu("a100")
    assert (gpu.l1_bytes, gpu.l2_bytes, gpu.registers_per_sm) == (
        a100.l1_bytes,
        a100.l2_bytes,
        a100.registers_per_sm,
    )
