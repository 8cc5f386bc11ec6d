"""The most a policy that cannot see the future can be sure of, as one exact linear program.

A *mission* is a list of phases ``[(load, seconds)]`` (``load`` a name, ``None`` for a wait);
each load has an upper concave envelope of work rate against board power (``hulls[load]``:
``[(power W, work/s)]``, least power first; a wait's is its one least-power point). The
missions are what the policy may face; they share their start while their phases agree, and
a policy that cannot see the future must do the same there. Time is cut at every phase end
of every mission; on each piece a mission runs its load at a mix of the envelope's vertices
(seconds ``x_v ≥ 0`` at vertex ``v``, summing to the piece's length: time-sharing two
clocks is what the envelope's segments are), so its energy is ``Σ x_v P_v`` and its work
``Σ x_v r_v``, both linear. Missions whose loads agree up to a piece's end share that
piece's variables (causality). The program::

    maximise z
    subject to  work(m) ≥ z · best(m)      for every mission m
                energy(m) ≤ budget         for every mission m

with ``best(m)`` the mission's own yardstick (its best constant clock's work on the budget).
Its optimum is the bound; it is exact, not gridded: the envelopes are the breakpoints, and
the program's vertices are the best schedule's.
"""

from __future__ import annotations

__all__ = ["pieces", "sure_ratio"]


def pieces(missions):
    """The cut times ``[0, t1, …, T]`` at every phase end of every mission (all of one
    length ``T``), and per mission the load on each piece."""
    ends = set()
    length = None
    for phases in missions:
        t = 0.0
        for _load, s in phases:
            t += s
            ends.add(round(t, 9))
        if length is None:
            length = round(t, 9)
        elif abs(length - t) > 1e-6:
            raise ValueError("the missions must be of one length")
    cuts = [0.0] + sorted(ends)
    loads = []
    for phases in missions:
        row, t, k = [], 0.0, 0
        bounds = []
        for load, s in phases:
            bounds.append((t, t + s, load))
            t += s
        for a, b in zip(cuts, cuts[1:]):
            mid = (a + b) / 2
            while bounds[k][1] < mid:
                k += 1
            row.append(bounds[k][2])
        loads.append(row)
    return cuts, loads


def sure_ratio(hulls, missions, best_work, budget_j):
    """(the bound ``z``, the energy each mission spends by each cut) for ``missions`` on
    ``budget_j``: the largest ``z`` such that one causal schedule does at least ``z`` times
    ``best_work[m]`` on every mission ``m`` within the budget (see the module). ``z`` is 0
    where no schedule lasts every mission (each runs at least its least power)."""
    from scipy.optimize import linprog

    cuts, loads = pieces(missions)
    index = {}  # (the loads up to and including piece k) -> first variable of its vertices
    n = 1  # variable 0 is z
    per_mission = []
    for row in loads:
        mine = []
        for k, load in enumerate(row):
            key = tuple(row[: k + 1])
            if key not in index:
                index[key] = n
                n += len(hulls[load])
            mine.append((k, load, index[key]))
        per_mission.append(mine)
    a_ub, b_ub, a_eq, b_eq = [], [], [], []
    done = set()
    for m, mine in enumerate(per_mission):
        work = [0.0] * n
        energy = [0.0] * n
        for k, load, first in mine:
            for v, (p_w, r) in enumerate(hulls[load]):
                work[first + v] -= r
                energy[first + v] += p_w
            if first not in done:
                done.add(first)
                row = [0.0] * n
                for v in range(len(hulls[load])):
                    row[first + v] = 1.0
                a_eq.append(row)
                b_eq.append(cuts[k + 1] - cuts[k])
        work[0] = best_work[m]
        a_ub.append(work)
        b_ub.append(0.0)
        a_ub.append(energy)
        b_ub.append(budget_j)
    c = [0.0] * n
    c[0] = -1.0
    bounds = [(0.0, 100.0)] + [(0.0, None)] * (n - 1)
    res = linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq, bounds=bounds, method="highs")
    if res.status != 0:
        return 0.0, None
    x = res.x
    spent = []
    for mine in per_mission:
        run, acc = [0.0], 0.0
        for _k, load, first in mine:
            acc += sum(float(x[first + v]) * p_w for v, (p_w, _r) in enumerate(hulls[load]))
            run.append(acc)
        spent.append(run)
    return float(x[0]), spent
