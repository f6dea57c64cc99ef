"""``clp``'s search: which base predictors and CLP candidates, in what order, under what time budget.

Everything that decides *what* ``clp`` computes lives in this module; the stages it calls (fitting a predictor,
computing a group of CLP candidates, the validation rule of :mod:`jaxclp.selection`) are handed in as functions.
:class:`jaxclp.CLP`, the runner's ``clp`` and ``jaxclp predict`` all run it.

* :class:`SearchPlan` is the search as a value: the candidates (MLP depths, base predictors, kinds of CLP
  candidate), what each is expected to cost, their order and the time limit. ``plan.describe(unit)`` prints it
  before anything runs (``jaxclp run ... --plan``, :meth:`jaxclp.CLP.plan`).
* :class:`Search` runs a plan on one split: one clock, one budget (:data:`MLP_TIME_SHARE` for the MLP prior's
  depths, :data:`PRIOR_COST` for the base predictors, :data:`GRID_COST` for the kinds of CLP candidate, and the
  large-validation step's other grids), and a log of what was left out and why (:attr:`Search.skipped`).
* :class:`Decisions` is what the first split of a run decided under a limit (predictors left out, the epochs a
  stopped predictor reached, the kinds of CLP candidate left out per predictor, the other grids left out): the
  runner hands it to the later splits, which then compute the same things without a clock, so that a run's splits
  are comparable. It is written into each record (``record["decisions"]``) and read back by
  :meth:`Decisions.from_record`.

Without a time limit a search computes every candidate in the plan's order; the limit only leaves things out,
never reorders or changes what is computed.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from typing import Callable, Iterable, Mapping, Sequence

import jax
import numpy as np

from jaxclp.fit_threads import run_each

__all__ = ["CLP_PRIOR_CANDIDATES", "Decisions", "GRID_COST", "GRID_KIND_NAMES", "MLP_DEPTHS", "MLP_TIME_SHARE",
           "PRIOR_COST", "Search", "SearchPlan", "check_time_limit", "estimate_unit_seconds", "side_by_side_order"]

# ----------------------------------------------------------------------------------------------- the candidates
MLP_DEPTHS = (1, 2, 3)
"""Depths of the runner's MLP priors (fitted per split, vmapped over splits; the depth is chosen on validation)."""

CLP_PRIOR_CANDIDATES = ("mlp", "link", "linkx", "gcn", "h2gcn", "gcn_tuned", "sage_tuned")
"""Base predictors the runner's ``clp`` tries on every split, cheap first: the MLP, the two structure-only /
structure+feature linear models, the two GNNs of the paper's tables (Kipf's GCN; H2GCN, the heterophily GNN that
wins minesweeper by 18 AUC points) and the two tuned GNNs that beat ``clp`` revision 0 by more than one std (tuned
GCN on Wiki and Twitch-RU, SAGE on Europe-Airports; table_gnn), each with its spec chosen on validation among the
tuned grid's 8 (:func:`jaxclp.priors.tuned_gnn_prior`). Add "gat_tuned", "sage", "gat" via ``priors=``."""

GRID_KINDS = ("closed", "spectral", "l1", "authors")
"""Kinds of CLP candidate, in the order a time limit computes them (cheapest first, :data:`GRID_COST`)."""

# ------------------------------------------------------------------------------------------ what each costs
MLP_TIME_SHARE = 0.25
"""Under a time limit, the share of it (per split) the MLP priors may take: depths are fitted in
:data:`MLP_DEPTHS` order, the first always, a further one only while the seconds so far plus the last depth's
fit within this share; the rest of the limit is for ``clp``'s base predictors and CLP's candidates. A quarter
(a half until 2026-12-05), so that where one MLP fit costs much of the limit a graph-aware predictor of the same
cost (GCN) can still start: ``benchmarks/results/mlp_time_share.md``."""

PRIOR_COST = {"mlp": 1.0, "link": 0.5, "linkx": 2.0, "gcn": 1.0, "sage": 1.0, "gat": 2.0, "h2gcn": 2.0,
              "gcn_tuned": 6.0, "sage_tuned": 6.0, "gat_tuned": 9.0}
"""Expected cost of fitting each named predictor, in units of one 2-layer GCN fit on the same graph (compilation
included). A tuned GNN fits 8 specs of up to 5 blocks in one compiled program (:func:`jaxclp.gnn.fit_gnn_grid`):
on two medium splits ``gcn_tuned`` / ``sage_tuned`` took 3.5x / 4.2x a GCN fit on Texas (compile-bound) and
4.4x / 5.4x on Wiki (training-bound); 6 leaves room. Unknown names count :data:`UNKNOWN_PRIOR_COST`; arrays and
fitted objects 0."""

UNKNOWN_PRIOR_COST = 16.0
"""Cost units of a predictor not in :data:`PRIOR_COST` (a user's own name)."""

GRID_COST = {"closed": 1.0, "spectral": 2.8, "l1": 3.6, "authors": 8.2}
"""Expected seconds of each kind of CLP candidate, relative to the closed-form variants (all of a kind together):
the paper's closed form (always computed), the spectrally scaled closed form, the per-step L1 variants, the
authors' step (160 configurations x 20 layers). Measured on a 42k-node, 40-class arxiv-shaped graph
(5.0 / 14.1 / 18.0 / 41.3 s, ``benchmarks/results/grid_budget.md``); a deadline computes them in this order."""

GRID_KIND_NAMES = {"spectral": "clp spectral variants", "l1": "clp L1 variants", "authors": "clp authors' step"}
"""How a kind of candidate left out for time is named in a record's ``skipped`` (beside base predictors)."""


def check_time_limit(time_limit, name: str = "time_limit") -> float | None:
    """``time_limit`` as seconds (a float >= 0; 0 fits the first predictor only), or None for no limit: the one
    rule :class:`Search`, :class:`jaxclp.CLP` and ``jaxclp run/predict --time-limit`` apply.

    Raises:
        ValueError: not a finite number >= 0 (the message names ``name`` and the way out).
    """
    if time_limit is None:
        return None
    try:
        t = float(time_limit)
    except (TypeError, ValueError):
        t = float("nan")
    if not (np.isfinite(t) and t >= 0):
        none = "'none'" if name.startswith("--") else "None"  # the spelling of "no limit" where name is given
        raise ValueError(f"{name} must be a number of seconds >= 0, or {none} for no limit; got {time_limit!r}")
    return t


def prior_cost(name) -> float:
    """Cost units of fitting predictor ``name`` (:data:`PRIOR_COST`; a non-string, an array or fitted model: 0)."""
    return PRIOR_COST.get(name, UNKNOWN_PRIOR_COST) if isinstance(name, str) else 0.0


CLOSED_FORM_SHARE = 0.1
"""Before a run, the closed-form CLP candidates on one predictor are expected to take this share of one cost unit
(a GCN fit) in :meth:`SearchPlan.describe` and :meth:`SearchPlan.left_out`; a search measures them instead."""


def estimate_unit_seconds(num_nodes: int, num_edges: int, num_features: int, epochs: int = 500) -> float:
    """A rough guess of the seconds of one cost unit (a 2-layer GCN fit, compilation included) on a 2-core CPU,
    for printing a plan before anything ran: ``2 s + 5e-9 s x (edges + nodes x features / 64) x 64 x epochs``
    (about 2-3 s on the paper's small graphs, ~200 s on a 169k-node arxiv-shaped graph). A running search
    measures the unit instead (:meth:`Search.spent`)."""
    work = (int(num_edges) + int(num_nodes) * max(int(num_features), 1) / 64.0) * 64.0 * int(epochs)
    return 2.0 + 5e-9 * work


def side_by_side_order(costs: Sequence[float], threads: int) -> list:
    """The order in which fits of expected ``costs`` start when ``threads`` of them run at once: the costliest
    first (ties in the given order), so that a core left alone at the end finishes a cheap fit, not a tuned grid
    (on a 300-node graph the SAGE grid, started last, ran alone for ~1.5 s of a ~6 s split). One thread: the given
    order. Only the order of starting changes; each fit and its result are the same."""
    positions = range(len(costs))
    return list(positions) if threads <= 1 else sorted(positions, key=lambda j: -float(costs[j]))


def rounded_seconds(seconds: float) -> str:
    """Seconds as a person reads them: whole seconds from 10 on (``47.6452`` -> ``48``), two significant digits
    below (``2.5``, ``0.25``)."""
    s = float(seconds)
    return f"{s:.0f}" if abs(s) >= 10 else f"{s:.2g}"


def limit_words(time_limit: float) -> str:
    """How a status message names the user's limit: ``20 s per split``."""
    return f"{rounded_seconds(time_limit)} s per split"


def mlp_deadline(start: float, time_limit: float | None, num_splits: int) -> float | None:
    """Where the MLP priors' training stops: :data:`MLP_TIME_SHARE` of the limit per split, for ``num_splits``
    splits fitted together from ``start`` (None: no limit)."""
    return None if time_limit is None else start + MLP_TIME_SHARE * float(time_limit) * int(num_splits)


def mlp_depth_fits(spent: float, last: float, time_limit: float | None) -> bool:
    """Whether one more MLP depth may start: the seconds so far per split (``spent``) plus the last depth's
    (``last``) within :data:`MLP_TIME_SHARE` of the limit (always without one)."""
    return time_limit is None or not spent + last > MLP_TIME_SHARE * float(time_limit)


# ------------------------------------------------------------------------------------------------ decisions
@dataclasses.dataclass(frozen=True)
class Decisions:
    """What the first split of a run decided under a time limit, handed to its later splits.

    Attributes:
        left_out: base predictors not fitted.
        epochs: ``{predictor: epochs}`` where the limit stopped a predictor's training (later splits train it
            for that many epochs, no clock).
        grid: ``{predictor: names}`` of the kinds of CLP candidate (``"spectral"``, ``"l1"``, ``"authors"``) and
            closed-form variants (``"clp closed form row/b0"``) left out on that predictor, for every predictor
            whose grid a split has computed under the limit (a predictor first chosen on a later split is decided
            there, and added).
        other_grids: ``{predictor: computed}`` of the large-validation step's other grids decided so far.
    """

    left_out: tuple = ()
    epochs: Mapping[str, int] = dataclasses.field(default_factory=dict)
    grid: Mapping[str, tuple] = dataclasses.field(default_factory=dict)
    other_grids: Mapping[str, bool] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict:
        """A JSON-able dict (a record's ``decisions``)."""
        return {"left_out": list(self.left_out), "epochs": dict(self.epochs),
                "grid": {k: list(v) for k, v in self.grid.items()}, "other_grids": dict(self.other_grids)}

    @classmethod
    def from_dict(cls, d: Mapping) -> Decisions:
        """The inverse of :meth:`as_dict`."""
        return cls(left_out=tuple(d.get("left_out", ())), epochs={k: int(v) for k, v in d.get("epochs", {}).items()},
                   grid={k: tuple(v) for k, v in d.get("grid", {}).items()},
                   other_grids={k: bool(v) for k, v in dict(d.get("other_grids", {})).items()})

    @classmethod
    def from_record(cls, record: Mapping) -> Decisions | None:
        """The decisions a result record was computed under (None: no time limit, nothing decided)."""
        d = record.get("decisions")
        return None if d is None else cls.from_dict(d)


# ------------------------------------------------------------------------------------------------- the plan
@dataclasses.dataclass(frozen=True)
class SearchPlan:
    """The search as a value: what ``clp`` will try, in what order, at what expected cost, under what limit.

    Attributes:
        priors: base predictors in the order they are fitted (names of :data:`jaxclp.priors.PRIORS`, or
            descriptions of user-given priors).
        mlp_depths: depths of the MLP prior the runner fits first (empty: the MLP is one of ``priors``).
        grid_kinds: kinds of CLP candidate on the chosen predictor, in :data:`GRID_KINDS` order.
        closed_variants: names of the closed-form variants (``"sym/mlp"``, ...), the first always computed.
        time_limit: seconds per split (None: no limit).
        unit_seconds: expected seconds of one cost unit (a GCN fit) on the graph at hand
            (:func:`estimate_unit_seconds`); None: unknown (costs shown in units only).

    ``str(plan)`` is :meth:`describe`.
    """

    priors: tuple
    mlp_depths: tuple = MLP_DEPTHS
    grid_kinds: tuple = GRID_KINDS
    closed_variants: tuple = ()
    time_limit: float | None = None
    unit_seconds: float | None = None

    @classmethod
    def for_graph(cls, graph, num_features: int = 1, epochs: int = 500, **fields) -> SearchPlan:
        """A plan whose :attr:`unit_seconds` is :func:`estimate_unit_seconds` of ``graph`` (its nodes and
        edges) with ``num_features`` input features."""
        unit = estimate_unit_seconds(int(graph.num_nodes), int(graph.num_edges), num_features, epochs)
        return cls(unit_seconds=unit, **fields)

    def __str__(self) -> str:
        return self.describe()

    def steps(self) -> list[tuple[str, str, float]]:
        """``[(stage, name, cost units), ...]`` in the order a search runs them: MLP depths (their time is
        :data:`MLP_TIME_SHARE` of the limit), base predictors (:data:`PRIOR_COST`), CLP's kinds of candidate on the
        chosen predictor (:data:`GRID_COST`, in units of the closed form's seconds, not of a GCN fit)."""
        out = [("mlp prior", f"mlp depth {d}", PRIOR_COST["mlp"]) for d in self.mlp_depths]
        out += [("base predictor", str(p), prior_cost(p)) for p in self.priors if p != "mlp" or not self.mlp_depths]
        count = len(self.closed_variants)
        closed = "clp closed form" + (f" ({count} variant{'s' if count != 1 else ''})" if count else "")
        out += [("clp candidates", GRID_KIND_NAMES.get(k, closed), GRID_COST[k]) for k in self.grid_kinds]
        return out

    def left_out(self, unit_seconds: float, grid_seconds: float | None = None) -> list[str]:
        """What the time limit would leave out if one cost unit took ``unit_seconds`` and the closed form
        ``grid_seconds`` (default: :data:`CLOSED_FORM_SHARE` of a unit): the MLP depths by
        :func:`mlp_depth_fits`, then a :class:`Search` run on a simulated clock where every fit and group of
        candidates takes its expected seconds (the same rules on expected instead of measured seconds). Empty
        without a limit."""
        if self.time_limit is None:
            return []
        out, mlp_seconds = [], 0.0
        for k, d in enumerate(self.mlp_depths):
            if k and not mlp_depth_fits(mlp_seconds, unit_seconds, self.time_limit):
                out += [f"mlp depth {e}" for e in self.mlp_depths[k:]]
                break
            mlp_seconds += unit_seconds
        clock = {"t": 0.0}

        def takes(seconds: float):  # a group of CLP candidates that takes its expected seconds
            def run():
                clock["t"] += seconds
                return {}
            return run

        def fit(i, deadline, epochs):  # a base predictor's fit that takes its expected seconds
            clock["t"] += prior_cost(self.priors[i]) * unit_seconds
            return True, None

        # the runner's Search has the split's time left after the MLP priors, and counts their fit first
        search = Search(max(0.0, self.time_limit - mlp_seconds), clock=lambda: clock["t"])
        search.fit_priors(self.priors, fit, fitted_before={"mlp": (True, unit_seconds)} if self.mlp_depths else {})
        g = unit_seconds * CLOSED_FORM_SHARE if grid_seconds is None else grid_seconds
        closed = self.closed_variants or ("",)
        groups = [("closed", f"clp closed form {v}".rstrip(), takes(g / len(closed))) for v in closed]
        groups += [(k, GRID_KIND_NAMES[k], takes(GRID_COST[k] * g)) for k in self.grid_kinds if k != "closed"]
        search.grid("plan", groups)
        return out + search.skipped

    def describe(self, unit_seconds: float | None = None) -> str:
        """The plan as text: one line per step with its cost (and expected seconds given ``unit_seconds``, default
        :attr:`unit_seconds`), then the limit and what it would leave out at that unit."""
        unit_seconds = self.unit_seconds if unit_seconds is None else unit_seconds
        limit = "no time limit" if self.time_limit is None else f"time limit {self.time_limit:g} s per split"
        lines = [f"clp search plan ({limit})"]
        for stage, name, cost in self.steps():
            unit = "x closed form" if stage == "clp candidates" else "GCN fits"
            secs = ""
            if unit_seconds is not None:
                s = cost * unit_seconds * (CLOSED_FORM_SHARE if stage == "clp candidates" else 1.0)
                secs = f"  ~{s:.0f} s" if s >= 1 else f"  ~{s:.1f} s"
            lines.append(f"  {stage:15s} {name:32s} {cost:4.1f} {unit}{secs}")
        if unit_seconds is not None:
            lines.append(f"  (expected seconds: a rough model, {unit_seconds:.1f} s per GCN fit; measured when run)")
            if self.time_limit is not None:
                out = self.left_out(unit_seconds)
                lines.append("  the limit would leave out: " + (", ".join(out) if out else "nothing"))
        return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ the search
class Search:
    """One split's run of a :class:`SearchPlan`: the clock, the budget, what was left out.

    Args:
        time_limit: seconds from construction (None: no limit).
        decisions: what the run's first split decided (:class:`Decisions`); given, this split leaves out the same
            things and trains a stopped predictor for the epochs it reached, with no clock. None: this split
            decides (see :meth:`decisions`).
        status: ``status(text)`` told what is being computed or left out (e.g. the runner's progress line).
        stated_limit: the user's time limit per split, named by the status messages (:func:`limit_words`) where
            ``time_limit`` is what remains of it; None: the messages name ``time_limit``.
        clock: seconds now (default :func:`time.perf_counter`); :meth:`SearchPlan.left_out` runs a search on a
            simulated one.
    """

    def __init__(self, time_limit: float | None = None, decisions: Decisions | None = None,
                 status: Callable[[str], None] | None = None, stated_limit: float | None = None,
                 clock: Callable[[], float] | None = None):
        self.time_limit = check_time_limit(time_limit)
        self.stated_limit = stated_limit
        """The user's limit per split (seconds), which :attr:`time_limit` is what remains of (the runner gives the
        time left after the MLP priors): only the status messages name it; None: they name :attr:`time_limit`."""
        self._clock = clock if clock is not None else lambda: time.perf_counter()
        self.start = self._clock()
        self.deadline = None if self.time_limit is None else self.start + self.time_limit
        self.given = decisions if self.time_limit is not None else None
        self._status = status or (lambda text: None)
        self.unit: float | None = None
        self.fitted = 0
        self.skipped: list[str] = []
        """Names of what was left out, in the order it happened (a record's ``skipped``)."""
        self._left_out: list[str] = []
        self._epochs: dict[str, int] = {}
        self._grid: dict[str, tuple] = {}
        self._other: dict[str, bool] = {}

    # ------------------------------------------------------------------ bookkeeping
    @property
    def limited(self) -> bool:
        return self.time_limit is not None

    def decisions(self) -> Decisions | None:
        """What this split followed and decided, to hand to the later splits: the given decisions with those
        this split made where none was given (a predictor's grid first computed here); None without a limit."""
        if not self.limited:
            return None
        if self.given is None:
            return Decisions(tuple(self._left_out), dict(self._epochs), dict(self._grid), dict(self._other))
        return dataclasses.replace(self.given, grid={**self.given.grid, **self._grid},
                                   other_grids={**self.given.other_grids, **self._other})

    def late(self, seconds: float) -> bool:
        """Whether ``seconds`` more would end past the deadline."""
        return self.deadline is not None and self._clock() + seconds > self.deadline

    def _limit_words(self) -> str:
        return (limit_words(self.stated_limit) if self.stated_limit is not None
                else f"{rounded_seconds(self.time_limit)} s")

    def _skip(self, name: str, message: str) -> None:
        self.skipped.append(name)
        self._status(message)

    # ------------------------------------------------------------------ base predictors
    def allows(self, name) -> bool:
        """Whether predictor ``name`` may still be fitted: the first always; another while
        ``prior_cost(name) * unit`` fits the time left, ``unit`` the largest seconds per cost unit seen so far."""
        if not self.limited or self.fitted == 0 or not isinstance(name, str):
            return True
        left = float(self.time_limit) - (self._clock() - self.start)
        return left > 0 and (self.unit is None or prior_cost(name) * self.unit <= left)

    def spent(self, name, seconds: float) -> None:
        """Records that fitting ``name`` took ``seconds`` (updates the seconds per cost unit)."""
        self.fitted += 1
        if prior_cost(name) > 0:
            self.unit = max(self.unit or 0.0, float(seconds) / prior_cost(name))

    def fit_priors(self, names: Sequence, fit: Callable, *, free: Callable = lambda name, epochs: False,
                   clocked: Iterable[str] = (), fitted_before: Mapping | None = None, threads: int = 1) -> dict:
        """Fits the base predictors ``names`` in order while the budget allows.

        Args:
            names: predictors, cheap first: names of :data:`jaxclp.priors.PRIORS`, or anything else (an array, a
                fitted model: cost 0, never left out, no clock).
            fit: ``fit(i, deadline, epochs) -> (prior, stopped_at)`` for ``names[i]``: ``deadline`` a
                :func:`time.perf_counter` time where training stops (None: none; ``math.inf``: train ``epochs``
                with no clock), ``epochs`` a cap from the first split (None: the configured epochs);
                ``stopped_at`` the epoch a deadline stopped it at, or None. A ``prior`` of None leaves the
                predictor out (the caller said why).
            free: ``free(name, epochs)``, whether that fit is already made (costs nothing, always used).
            clocked: the predictors whose fit takes a deadline (:data:`jaxclp.priors.DEADLINE_PRIORS`).
            fitted_before: ``{name: (prior, seconds)}`` fitted before the search (the runner's MLP prior): used as
                they are, their seconds count as the first measurement of the unit.
            threads: fits run at once where no clock decides (no limit, or the first split's decisions given):
                :func:`jaxclp.fit_threads.fit_threads`, started costliest first (:func:`side_by_side_order`); the
                first split under a limit fits one at a time, in order, as its budget measures each fit.

        Returns:
            ``{i: prior}`` of the predictors fitted (``i`` the position in ``names``), in order.
        """
        out, clocked = {}, set(clocked)
        fitted_before = dict(fitted_before or {})
        given = self.given
        timed = self.limited and given is None  # this split's clock decides what is fitted, one fit at a time
        steps = []  # without the clock, in order: (name, None) left out, (name, (i, cap, is_free, deadline)) a fit
        for i, name in enumerate(names):
            named = isinstance(name, str)
            if named and name in fitted_before:
                out[i], seconds = fitted_before[name]
                self.spent(name, seconds)
                continue
            cap = given.epochs.get(name) if given is not None and named else None
            is_free = named and bool(free(name, cap))
            if (named and name in given.left_out) if given is not None else (not is_free and not self.allows(name)):
                step = None
            else:
                deadline = None
                if self.limited and named and name in clocked and not is_free:
                    # the first split: training stops where the split's time runs out; the later ones train the
                    # epochs it reached with no clock, on the same compiled (chunked) programs
                    deadline = self.deadline if given is None else math.inf
                step = (i, cap, is_free, deadline)
            if timed:
                self._step(out, fit, name, step)
            else:
                steps.append((name, step))
        fits = [step for _, step in steps if step is not None]
        calls = [functools.partial(self._fit_timed, fit, i, deadline, cap) for i, cap, _, deadline in fits]
        order = side_by_side_order([0.0 if is_free else prior_cost(names[i]) for i, _, is_free, _ in fits], threads)
        made = dict(zip(order, run_each([calls[j] for j in order], threads)))
        done = iter(made[j] for j in range(len(fits)))
        for name, step in steps:
            self._step(out, fit, name, step, None if step is None else next(done))
        return dict(sorted(out.items()))

    def _fit_timed(self, fit: Callable, i: int, deadline, cap) -> tuple:
        t0 = self._clock()
        prior, stopped_at = fit(i, deadline, cap)
        return prior, stopped_at, self._clock() - t0

    def _step(self, out: dict, fit: Callable, name, step, result=None) -> None:
        """One step of :meth:`fit_priors`: ``name`` left out (``step`` None), or fitted (``step`` = ``(i, cap,
        is_free, deadline)``; ``result`` its :meth:`_fit_timed` where already made) and its bookkeeping."""
        if step is None:
            self._left_out.append(name)
            self._skip(name, f"base predictor {name} skipped: it would not fit in the time limit "
                             f"({self._limit_words()})")
            return
        i, cap, is_free, deadline = step
        prior, stopped_at, seconds = self._fit_timed(fit, i, deadline, cap) if result is None else result
        if prior is None:
            return
        if self.given is None and stopped_at is not None and deadline is not None:
            self._epochs[name] = cap = int(stopped_at)
        out[i] = prior
        if cap is not None:
            self._skip(f"{name} epochs after {cap}",
                       f"base predictor {name} stopped after epoch {cap} for the time limit "
                       f"({self._limit_words()})")
        self.spent(name, 0.0 if is_free else seconds)

    # ------------------------------------------------------------------ CLP's candidates on one predictor
    def grid(self, prior: str, groups: Sequence[tuple[str, str, Callable[[], dict]]]) -> dict:
        """CLP's candidates on predictor ``prior`` under the budget.

        Args:
            prior: the predictor's name (the key of this grid's decisions).
            groups: ``[(kind, name, thunk), ...]`` in the candidates' order; ``kind`` of :data:`GRID_KINDS`,
                ``name`` how a closed-form group left out is named (``"clp closed form row/b0"``), ``thunk()`` the
                group's ``{key: (n, K) scores}``.

        Returns:
            The candidates computed, in the groups' order. Without a limit every group; with one, the first
            closed-form group always, the other closed-form groups while one more (their mean seconds) fits, then
            each costlier kind while ``GRID_COST[kind]`` times the closed form's seconds fits.
        """
        if not self.limited:
            cands = {}
            for _, _, thunk in groups:
                cands.update(thunk())
            return cands
        given = self.given.grid if self.given is not None else {}
        decided = set(given[prior]) if prior in given else None  # None: this split decides, with the clock
        done, unit, left = {}, None, []
        closed = [i for i, (k, _, _) in enumerate(groups) if k == "closed"]
        for kind in sorted({k for k, _, _ in groups}, key=GRID_COST.get):
            if kind != "closed" and (kind in decided if decided is not None
                                     else unit is not None and self.late(GRID_COST[kind] * unit)):
                left.append(kind)
                self._skip(GRID_KIND_NAMES[kind], f"CLP candidates: {GRID_KIND_NAMES[kind]} skipped for time")
                continue
            t0 = self._clock()
            for i, (k, name, thunk) in enumerate(groups):
                if k != kind:
                    continue
                if kind == "closed" and i != closed[0]:  # the first closed-form variant always; others while they fit
                    per_variant = (self._clock() - t0) / len(done)
                    if name in decided if decided is not None else self.late(per_variant):
                        left.append(name)
                        self._skip(name, f"CLP candidates: {name} skipped for time")
                        continue
                done[i] = thunk()
                jax.block_until_ready(list(done[i].values()))
            if kind == "closed":  # the seconds of the whole closed form, from the variants computed
                unit = (self._clock() - t0) / len(done) * len(closed) / GRID_COST["closed"]
        if decided is None:
            self._grid[prior] = tuple(left)
        cands = {}
        for i in sorted(done):
            cands.update(done[i])
        return cands

    # ------------------------------------------------------------------ the large-validation step
    def other_grid(self, prior: str, fits: Callable[[], bool]) -> bool:
        """Whether the large-validation step (:func:`jaxclp.selection.prior_first`) computes CLP's grid on
        another predictor ``prior``, ``fits()`` its deadline's answer (the chosen predictor's grid time fits
        before it); the first split decides for the later ones; a grid left out is named ``"clp on NAME"``."""
        given = self.given.other_grids if self.given is not None else {}
        if prior in given:
            ok = given[prior]
        else:
            ok = self._other[prior] = bool(fits())
        if not ok:
            self._skip(f"clp on {prior}", f"CLP candidates on {prior} skipped for time")
        return ok
