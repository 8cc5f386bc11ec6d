"""Exact maximisation of the EATSS objective by branch and bound.

Every capacity constraint is a sum of products of tile sizes with positive coefficients, and the
objective ``W = B + sum(H_d * T_d)`` has non-negative weights, so both grow with every ``T_d``.
That gives two facts the search rests on:

- with the loops not yet chosen at their smallest tiles, a partial choice that breaks a
  constraint cannot be completed, and each open loop's largest tile that still fits is an upper
  bound on its value in any completion; ``W`` at those largest tiles bounds every completion;
- the last loop is best at its largest tile that fits (for the k best, at the few largest).

Loops that neither belong to the block nor carry weight (``H_d = 0``, not parallel) change no
objective and only use resources, so they stay at their smallest tile: lowering one keeps
every constraint and ``W``. The rule ``W >= T_d`` holds by itself for the other loops (a
parallel loop divides ``B``, a weighted one has ``H_d >= 1``) and is checked for these.

The search visits values from large to small, so good configurations come first and prune
the rest; it returns the exact maximum, found in milliseconds on the catalog.
"""

from __future__ import annotations

import heapq
from typing import Dict, List, Sequence, Tuple

from governor.tuning.eatss.formulation import Problem

__all__ = ["search"]


def search(problem: Problem, k: int = 1) -> List[Tuple[int, Tuple[int, ...]]]:
    """The ``k`` best ``(W, tiles)`` pairs of ``problem``, best first (empty if none fits).

    Ties at the k-th place are broken arbitrarily; configurations that differ only in a loop
    without influence on ``W`` (kept at its smallest tile) are not listed separately.
    """
    if k < 1:
        return []
    n = len(problem.loops)
    lower = problem.lower
    step = problem.step
    upper = problem.upper
    weights = problem.weights
    par = set(problem.parallel)
    parallel = problem.parallel

    free = [d for d in range(n) if step[d] > 0 and (d in par or weights[d] > 0)]
    # Loops whose W >= T_d rule is not automatic keep their smallest tile; W must reach it.
    need = max(
        [lower[d] for d in range(n) if d not in par and weights[d] == 0] + [0],
    )

    # Constraint data as plain tuples for speed: (capacity, ((coef, loops), ...)).
    cons = [(c.capacity, c.monomials) for c in problem.constraints]
    t = list(lower)

    for cap, monos in cons:
        if _usage(monos, t) > cap:
            return []

    # Search order: heavier loops first (their bound is tightest early), then block loops.
    def rank(d: int) -> Tuple[int, int, int]:
        return (-(weights[d] * upper[d]), 0 if d in par else 1, d)

    order = sorted(free, key=rank)
    # Per loop, the constraints that mention it.
    touching = [
        [(cap, monos) for cap, monos in cons if any(d in m[1] for m in monos)] for d in range(n)
    ]

    # Monomials that contain every block loop bound B itself: coef * B * rest <= cap - others.
    b_limits = []
    for cap, monos in cons:
        for i, (coef, loops) in enumerate(monos):
            if par.issubset(loops):
                others = monos[:i] + monos[i + 1 :]
                extra = tuple(e for e in loops if e not in par)
                b_limits.append((cap, coef, extra, others))

    heap: List[Tuple[int, int, Tuple[int, ...]]] = []
    counter = [0]

    def largest(d: int) -> int:
        """Largest tile of loop d that fits, the others as in t (assumed feasible)."""
        hi = upper[d]
        for cap, monos in touching[d]:
            const = 0
            lin = 0
            for coef, loops in monos:
                term = coef
                has = False
                for e in loops:
                    if e == d:
                        has = True
                    else:
                        term *= t[e]
                if has:
                    lin += term
                else:
                    const += term
            room = (cap - const) // lin
            if room < hi:
                hi = room
        st = step[d]
        return hi // st * st

    def objective() -> int:
        w = 1
        for d in parallel:
            w *= t[d]
        for d in range(n):
            w += weights[d] * t[d]
        return w

    def threshold() -> int:
        return heap[0][0] if len(heap) >= k else -1

    def record(w: int) -> None:
        counter[0] += 1
        item = (w, -counter[0], tuple(t))
        if len(heap) < k:
            heapq.heappush(heap, item)
        else:
            heapq.heappushpop(heap, item)

    def block_cap(open_set: set, open_block: List[int]) -> int:
        """An upper bound on B over completions; open loops at their smallest in t."""
        assigned = 1
        unit = 1
        for e in parallel:
            if e in open_set:
                unit *= step[e]
            else:
                assigned *= t[e]
                unit *= t[e]
        cap_b = -1
        for cap, coef, extra, others in b_limits:
            div = coef
            for e in extra:
                div *= t[e]
            lim = (cap - _usage(others, t)) // div
            if cap_b < 0 or lim < cap_b:
                cap_b = lim
        # A constraint linear in each open block loop, sum(a_e * T_e) <= room, bounds their
        # product by (room / q)^q / prod(a_e) (arithmetic-geometric mean inequality).
        q = len(open_block)
        if q:
            for cap, monos in cons:
                coefs: Dict[int, int] = {}
                const = 0
                linear = True
                for coef, loops in monos:
                    term = coef
                    hit = -1
                    for e in loops:
                        if e in open_set and e in par:
                            if hit >= 0:
                                linear = False
                            hit = e
                        else:
                            term *= t[e]
                    if hit < 0:
                        const += term
                    else:
                        coefs[hit] = coefs.get(hit, 0) + term
                if not linear or len(coefs) != q:
                    continue
                room = cap - const
                if q == 1:
                    lim = assigned * (room // coefs[open_block[0]])
                else:
                    denom = 1
                    for a in coefs.values():
                        denom *= a
                    lim = assigned * int((room / q) ** q / denom * (1 + 1e-9) + 1)
                if cap_b < 0 or lim < cap_b:
                    cap_b = lim
        if cap_b < 0:
            return -1
        return cap_b // unit * unit  # B is a multiple of the assigned loops and open steps

    last = len(order) - 1

    if last < 0:
        w = objective()
        if w >= need:
            record(w)
        return _sorted(heap)

    def dfs(level: int) -> None:
        d = order[level]
        top = largest(d)
        lo = lower[d]
        st = step[d]
        if level == last:
            v = top
            while v >= lo:
                t[d] = v
                w = objective()
                if w < need or w <= threshold():
                    break
                record(w)
                v -= st
            t[d] = lo
            return
        rest = order[level + 1 :]
        rest_set = set(rest)
        open_block = [e for e in parallel if e in rest_set]
        exact_next = k == 1 and level + 1 == last  # the bound is the leaf's value
        v = top
        while v >= lo:
            t[d] = v
            if exact_next:
                e = rest[0]
                t[e] = largest(e)
                w = objective()
                if w >= need and w > threshold():
                    record(w)
                t[e] = lower[e]
                v -= st
                continue
            # Bound: every open loop at its own largest fitting tile, B at its own cap.
            highs = [largest(e) for e in rest]
            b_cap = block_cap(rest_set, open_block) if open_block else -1
            for e, val in zip(rest, highs):
                t[e] = val
            bound = objective()
            if b_cap >= 0:
                b_free = 1
                for e in parallel:
                    b_free *= t[e]
                if b_cap < b_free:
                    bound -= b_free - b_cap
            for e in rest:
                t[e] = lower[e]
            if bound > threshold() and bound >= need:
                dfs(level + 1)
            v -= st
        t[d] = lo

    dfs(0)
    return _sorted(heap)


def _usage(monos: Sequence[Tuple[int, Tuple[int, ...]]], t: Sequence[int]) -> int:
    total = 0
    for coef, loops in monos:
        term = coef
        for e in loops:
            term *= t[e]
        total += term
    return total


def _sorted(heap: List[Tuple[int, int, Tuple[int, ...]]]) -> List[Tuple[int, Tuple[int, ...]]]:
    return [(w, tiles) for w, _, tiles in sorted(heap, reverse=True)]
