"""jaxclp.search: the plan as a value, one budget, decisions handed from the first split to the later ones."""

import ast
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxclp
from jaxclp.features import as_features
from jaxclp import search as S
from jaxclp.experiments import candidates, methods as M


@pytest.fixture
def clock(monkeypatch):
    """A fake time.perf_counter every module reads (``clock["t"]``)."""
    t = {"t": 0.0}
    monkeypatch.setattr(S.time, "perf_counter", lambda: t["t"])
    return t


def _fits(clock, seconds):
    """A ``fit(i, deadline, epochs)`` for Search.fit_priors over names whose fit takes ``seconds[name]``."""
    calls = []

    def make(names):
        def fit(i, deadline, epochs):
            calls.append((names[i], deadline, epochs))
            clock["t"] += seconds[names[i]]
            return np.ones(1), None
        return fit
    return make, calls


def test_priors_fit_while_their_expected_cost_fits_the_time_left(clock):
    """The unit is the largest seconds per cost unit seen so far; a predictor is fitted while
    PRIOR_COST[name] * unit fits the time left; the first always (hand-computed)."""
    names = ("link", "gcn", "h2gcn", "gcn_tuned")
    make, calls = _fits(clock, {"link": 1.0, "gcn": 2.0, "h2gcn": 4.0, "gcn_tuned": 12.0})
    search = S.Search(10.0)
    out = search.fit_priors(names, make(names))
    # link at t=1 (unit 2), gcn at t=3 (unit 2), h2gcn (2 x 2 = 4 <= 7 left) at t=7; gcn_tuned 6 x 2 = 12 > 3
    assert [c[0] for c in calls] == ["link", "gcn", "h2gcn"] and list(out) == [0, 1, 2]
    assert search.skipped == ["gcn_tuned"] and search.unit == 2.0
    assert search.decisions() == S.Decisions(left_out=("gcn_tuned",))
    # no limit: everything, no decisions
    clock["t"] = 0.0
    calls.clear()
    free = S.Search(None)
    free.fit_priors(names, make(names))
    assert len(calls) == 4 and free.skipped == [] and free.decisions() is None


def test_later_splits_follow_the_first_splits_decisions_as_a_value(clock):
    """Given Decisions, a search leaves out what the first split left out and trains a stopped predictor for the
    epochs it reached with no clock (deadline inf), however fast the fits are now; decisions survive a record."""
    names = ("link", "gcn", "gcn_tuned")

    def first_fit(i, deadline, epochs):
        clock["t"] += 1.0
        return np.ones(1), (25 if names[i] == "gcn" and deadline is not None else None)

    first = S.Search(3.0)
    first.fit_priors(names, first_fit, clocked=("gcn", "gcn_tuned"))
    assert first.skipped == ["gcn epochs after 25", "gcn_tuned"]
    made = first.decisions()
    record = json.loads(json.dumps({"decisions": made.as_dict()}))
    assert S.Decisions.from_record(record) == made and S.Decisions.from_record({}) is None
    seen = []

    def later_fit(i, deadline, epochs):
        seen.append((names[i], deadline, epochs))
        return np.ones(1), None

    later = S.Search(3.0, S.Decisions.from_record(record))
    later.fit_priors(names, later_fit, clocked=("gcn", "gcn_tuned"))
    assert seen == [("link", None, None), ("gcn", np.inf, 25)]
    assert later.skipped == first.skipped and later.decisions() == made
    # without a limit the decisions do not apply
    seen.clear()
    S.Search(None, made).fit_priors(names, later_fit, clocked=("gcn",))
    assert [s[0] for s in seen] == list(names)


def test_fits_no_clock_decides_run_side_by_side_with_the_bookkeeping_in_order():
    """Without a limit, and on a later split following given decisions, fit_priors runs its fits in ``threads``
    threads (two fits that wait for each other finish), and returns and records them in the names' order, as one
    at a time does; the first split under a limit fits one at a time (its budget measures each fit)."""
    import threading

    names = ("link", "gcn", "h2gcn", "gcn_tuned")
    made = S.Decisions(("h2gcn",), {"gcn": 25}, {}, {})

    def run(limit, decisions, threads, barrier=None):
        seen = []

        def fit(i, deadline, epochs):
            if barrier is not None and names[i] in ("gcn", "gcn_tuned"):
                barrier.wait()
            seen.append(names[i])
            return np.full(1, i), None

        search = S.Search(limit, decisions)
        out = search.fit_priors(names, fit, clocked=("gcn", "gcn_tuned"), threads=threads)
        return out, search.skipped, seen

    for limit, decisions in ((None, None), (3.0, made)):
        out, skipped, _ = run(limit, decisions, 2, threading.Barrier(2, timeout=30))
        ref_out, ref_skipped, ref_seen = run(limit, decisions, 1)
        assert list(out) == list(ref_out) and skipped == ref_skipped
        assert all(np.array_equal(out[i], ref_out[i]) for i in out)
    assert ref_skipped == ["gcn epochs after 25", "h2gcn"] and ref_seen == ["link", "gcn", "gcn_tuned"]
    with pytest.raises(threading.BrokenBarrierError):  # the first split under a limit: one fit at a time
        run(1e9, None, 2, threading.Barrier(2, timeout=1))


def test_side_by_side_fits_start_costliest_first_and_return_in_the_names_order(monkeypatch):
    """With threads, the fits start in descending expected cost (ties in the names' order; a fit already made
    costs 0), so a tuned grid never starts last; the priors come back, and are recorded, in the names' order.
    One thread keeps the names' order."""
    assert S.side_by_side_order([0.5, 1.0, 6.0, 2.0, 6.0], 2) == [2, 4, 3, 1, 0]
    assert S.side_by_side_order([0.5, 1.0, 6.0], 1) == [0, 1, 2]
    names = ("link", "linkx", "gcn", "h2gcn", "gcn_tuned", "sage_tuned")
    started = []
    monkeypatch.setattr(S, "run_each", lambda calls, threads: [call() for call in calls])  # in the order given

    def fit(i, deadline, epochs):
        started.append(names[i])
        return np.full(1, i), None

    out = S.Search().fit_priors(names, fit, free=lambda name, epochs: name == "sage_tuned", threads=2)
    assert started == ["gcn_tuned", "linkx", "h2gcn", "gcn", "link", "sage_tuned"]
    assert list(out) == list(range(len(names))) and [int(out[i][0]) for i in out] == list(range(len(names)))
    started.clear()
    S.Search().fit_priors(names, fit, threads=1)
    assert started == list(names)


def test_the_plan_says_before_running_what_the_search_leaves_out(clock):
    """SearchPlan.left_out applies the search's rules to expected seconds: with fits taking exactly the expected
    seconds (cost x unit), the search leaves out the predictors the plan named."""
    plan = S.SearchPlan(priors=("link", "linkx", "gcn", "h2gcn", "gcn_tuned"), mlp_depths=(), grid_kinds=("closed",),
                        time_limit=12.0)
    unit = 2.0
    assert plan.left_out(unit) == ["gcn_tuned"]
    make, calls = _fits(clock, {p: S.PRIOR_COST[p] * unit for p in plan.priors})
    search = S.Search(plan.time_limit)
    search.fit_priors(plan.priors, make(plan.priors))
    assert search.skipped == plan.left_out(unit)
    text = plan.describe(unit)
    assert "gcn_tuned" in text and "~12 s" in text and "would leave out: gcn_tuned" in text
    assert S.SearchPlan(priors=("mlp",), time_limit=None).left_out(100.0) == []
    # the runner's plan: MLP depths, clp's predictors, every kind of CLP candidate in GRID_COST order
    runner_plan = M.clp_plan(time_limit=20.0)
    assert runner_plan.priors == S.CLP_PRIOR_CANDIDATES and runner_plan.mlp_depths == S.MLP_DEPTHS
    assert runner_plan.grid_kinds == ("closed", "spectral", "l1", "authors")
    assert [s[1] for s in runner_plan.steps()][:3] == ["mlp depth 1", "mlp depth 2", "mlp depth 3"]


def test_the_estimator_plans_its_own_priors_and_candidates():
    ds = jaxclp.datasets.synthetic(0.3, 4, num_classes=3, nodes_per_class=10, seed=0)
    plan = jaxclp.CLP(prior=("mlp", "link"), normalization=["sym", "row"], time_limit=5.0, num_classes=3).plan(
        ds.graph, np.zeros((30, 4)))
    assert plan.priors == ("mlp", "link") and plan.mlp_depths == () and plan.grid_kinds == ("closed",)
    assert plan.closed_variants == ("sym/mlp", "row/mlp") and plan.time_limit == 5.0
    assert plan.unit_seconds == pytest.approx(S.estimate_unit_seconds(30, int(ds.graph.num_edges), 4))
    assert str(plan).startswith("clp search plan (time limit 5 s per split)")


def test_the_estimator_and_the_runner_leave_out_the_same_under_one_clock(monkeypatch, clock):
    """jaxclp.CLP(time_limit=...) and the runner's clp fit their base predictors through the same Search: with
    the same fit seconds they fit and leave out the same predictors."""
    ds = jaxclp.datasets.synthetic(0.3, 4, num_classes=3, nodes_per_class=20, seed=0)
    y = np.asarray(ds.labels)
    tm, vm = np.arange(y.size) % 3 == 0, np.arange(y.size) % 3 == 1
    seconds = {"link": 1.0, "gcn": 2.0, "h2gcn": 4.0, "gcn_tuned": 12.0}
    names = tuple(seconds)
    fitted = []

    def fake_fit(name, *args, **kwargs):
        fitted.append(name)
        clock["t"] += seconds[name]
        return jaxclp.priors.PriorResult(prior=np.full((y.size, 3), 1 / 3, np.float32), name=name, val_score=0.0)

    monkeypatch.setattr(jaxclp.estimator, "fit_prior", fake_fit)
    monkeypatch.setattr(M, "fit_prior", fake_fit)
    x = np.zeros((y.size, 4), np.float32)
    est = jaxclp.CLP(prior=names, time_limit=10.0, num_classes=3).fit(ds.graph, x, y, tm, vm)
    by_estimator, fitted[:] = list(fitted), []
    ctx = candidates.Context(graph=ds.graph, features=as_features(x),
                             labels=jnp.asarray(np.where(tm | vm, y, -1), jnp.int32), train=jnp.asarray(tm),
                             val=jnp.asarray(vm), num_classes=3, metric="accuracy", key=jax.random.key(0),
                             priors={1: jnp.full((y.size, 3), 1 / 3)}, mlp_depth=1, time_limit=10.0)
    cands = M.method_clp_prior(ctx, priors=names, variants=(("sym", False, "mlp"),), authors=False, spectral=False)
    assert fitted == by_estimator == ["link", "gcn", "h2gcn"]
    assert est.skipped_priors_ == cands.skipped == ["gcn_tuned"]


def test_no_module_keeps_decisions_in_state_keyed_by_identity():
    """The search's decisions are values: no module of the package keeps a dict keyed by id(...) or a weakref memo
    at module level (methods' _SKIPS and gnn's two-hop memo are gone)."""
    root = Path(jaxclp.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "id":
                offenders.append(f"{path.relative_to(root)}:{node.lineno} id(...)")
            if isinstance(node, ast.Attribute) and node.attr == "ref" and getattr(node.value, "id", "") == "weakref":
                offenders.append(f"{path.relative_to(root)}:{node.lineno} weakref.ref")
    assert not offenders, offenders
    assert not hasattr(M, "_SKIPS") and not hasattr(M, "CACHE")


def test_the_architecture_page_names_what_exists():
    """docs/architecture.md: every `jaxclp...` name it mentions imports (a module) or resolves (an attribute of
    one), and it says which one module holds clp's search."""
    import importlib
    import re

    text = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()
    names = sorted(set(re.findall(r"`(jaxclp(?:\.\w+)+)`", text)))
    assert len(names) > 30
    missing = []
    for name in names:
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):  # the longest importable module, then attributes
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            try:
                for attr in parts[cut:]:
                    obj = getattr(obj, attr)
            except AttributeError:
                missing.append(name)
            break
        else:
            missing.append(name)
    assert not missing, missing
    assert "One module decides what `clp` computes: `jaxclp.search`" in text


def test_a_grid_first_computed_on_a_later_split_is_decided_there_and_handed_on(clock):
    """Decisions cover the predictors whose grid a split computed; a later split that chooses another predictor
    decides that grid with its clock (not the whole grid unbounded) and the merged decisions go on."""
    def groups(seconds):
        def thunk(cost, key):
            def run():
                clock["t"] += cost
                return {key: np.zeros(1)}
            return run
        return [("closed", "clp closed form sym/mlp", thunk(seconds, "a")),
                ("closed", "clp closed form row/mlp", thunk(seconds, "b")),
                ("spectral", S.GRID_KIND_NAMES["spectral"], thunk(3 * seconds, "c"))]

    first = S.Search(10.0)
    assert list(first.grid("gcn", groups(1.0))) == ["a", "b", "c"]
    made = first.decisions()
    assert made.grid == {"gcn": ()}
    later = S.Search(2.5, made)  # a tighter clock: link's grid is decided here, gcn's followed
    assert list(later.grid("link", groups(1.0))) == ["a", "b"] and later.skipped == ["clp spectral variants"]
    assert list(later.grid("gcn", groups(1.0))) == ["a", "b", "c"]  # decided by the first split: no clock
    merged = later.decisions()
    assert merged.grid == {"gcn": (), "link": ("spectral",)}
    assert S.Decisions.from_dict(json.loads(json.dumps(merged.as_dict()))) == merged
    # the large-validation step's other grids: decided once per predictor, followed after
    assert later.other_grid("h2gcn", lambda: False) is False and later.decisions().other_grids == {"h2gcn": False}
    again = S.Search(2.5, later.decisions())
    assert again.other_grid("h2gcn", lambda: True) is False and again.other_grid("mlp", lambda: True) is True


def test_a_records_plan_reads_back():
    """clp_plan_of_record: the plan and decisions a clp record was made under (priors from the run's config,
    else the method spec; the time limit; the decisions), from a record as the runner writes it."""
    from jaxclp.experiments import specs

    record = {"type": "result", "method": "clp", "config": {"time_limit": 10.0, "priors": ["mlp", "link"]},
              "method_spec": specs.method_spec("clp"), "skipped": ["link"],
              "decisions": S.Decisions(left_out=("link",)).as_dict()}
    plan, decisions = M.clp_plan_of_record(record)
    assert plan.priors == ("mlp", "link") and plan.time_limit == 10.0 and decisions.left_out == ("link",)
    plan, decisions = M.clp_plan_of_record({**record, "config": {}, "decisions": None})
    assert plan.priors == S.CLP_PRIOR_CANDIDATES and plan.time_limit is None
    with pytest.raises(ValueError, match="not a clp result record"):
        M.clp_plan_of_record({"type": "result", "method": "lp"})


def test_skip_messages_name_the_users_limit_rounded():
    """The status said ``skipped: time limit 47.6452 s``, the split's time left after the MLP priors; now it names
    the user's limit per split, rounded; what is recorded (``skipped``) stays the predictor's name."""
    said = []
    search = S.Search(0.0, status=said.append, stated_limit=20.4)
    search.fit_priors(["mlp", "gcn_tuned"], lambda i, deadline, epochs: ("prior", None))
    assert search.skipped == ["gcn_tuned"]
    assert said == ["base predictor gcn_tuned skipped: it would not fit in the time limit (20 s per split)"]
    said.clear()
    alone = S.Search(0.0, status=said.append)  # no stated limit (jaxclp.CLP): its own, rounded
    alone.fit_priors(["mlp", "gcn_tuned"], lambda i, deadline, epochs: ("prior", None))
    assert said == ["base predictor gcn_tuned skipped: it would not fit in the time limit (0 s)"]
    assert [S.rounded_seconds(x) for x in (47.6452, 9.96, 2.5, 0.25, 0)] == ["48", "10", "2.5", "0.25", "0"]
