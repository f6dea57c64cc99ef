"""jaxclp.selection: the validation-only choice rule shared by jaxclp.CLP and the runner's clp."""

import numpy as np
import pytest

import jaxclp
from jaxclp import search
from jaxclp import selection as S
from jaxclp.experiments import candidates, methods as M, runner


def test_first_best_takes_the_first_maximal_finite_score():
    assert S.first_best([0.2, 0.5, np.nan, 0.5, np.inf]) == (1, 0.5)
    assert S.first_best([np.nan, -np.inf]) == (None, -np.inf)
    assert S.first_best([]) == (None, -np.inf)


def test_prior_first_reads_only_the_chosen_predictors_candidates_and_keeps_it_unless_beaten():
    asked = []

    def cands(i):
        asked.append(i)
        return {0: [0.1, 0.2], 1: [0.6, 0.7, 0.7], 2: [0.9]}[i]

    c = S.prior_first([0.5, 0.6, np.nan], cands)
    assert asked == [1] and c == S.Choice(1, 1, 0.7, 0.6) and c.propagated
    asked.clear()
    c = S.prior_first([0.5, 0.7, 0.7], cands)  # a tie between CLP and its prior goes to the prior
    assert asked == [1] and c == S.Choice(1, None, 0.7, 0.7) and not c.propagated
    c = S.prior_first([0.5], lambda i: [np.nan, np.nan])  # no finite candidate: the prior
    assert c == S.Choice(0, None, 0.5, 0.5)
    # a single given prior does not compete: CLP's best candidate, even below the prior's score
    assert S.prior_first([0.9], lambda i: [0.1, 0.3], keep_prior=False) == S.Choice(0, 1, 0.3, 0.9)
    assert S.prior_first([np.nan], lambda i: [0.1], keep_prior=False).candidate == 0
    with pytest.raises(ValueError, match="no base predictor has a finite validation score"):
        S.prior_first([np.nan, np.nan], cands)
    with pytest.raises(ValueError, match="no candidate has a finite validation score"):
        S.prior_first([0.5], lambda i: [np.nan], keep_prior=False)


def test_switch_margin_is_three_standard_errors_of_two_accuracies():
    # sqrt((0.75 * 0.25 + 0.87 * 0.13) / 24000) = 0.0035391...; x 3
    assert S.switch_margin(0.75, 0.87, 24000) == pytest.approx(3 * np.sqrt((0.1875 + 0.1131) / 24000), rel=1e-12)
    assert S.switch_margin(0.75, 0.87, 24000) == pytest.approx(0.010617, abs=1e-6)
    assert S.switch_margin(1.0, 0.0, 10) == 0.0


def test_prior_first_on_a_large_validation_set_takes_another_predictors_clearly_better_propagation():
    asked = []
    grid = {0: [0.70, 0.87], 1: [0.74, 0.75], 2: [0.751, 0.755]}

    def cands(i):
        asked.append(i)
        return grid[i]

    n = S.LARGE_VALIDATION
    # prior-first takes predictor 1 (0.71 alone) and its CLP (0.75); predictor 0's best propagation (0.87) beats
    # it by far more than the margin (0.03 at n = 5000); predictor 2's 0.755 is within it
    c = S.prior_first([0.65, 0.71, 0.70], cands, num_val=n)
    assert asked == [1, 0, 2] and c == S.Choice(0, 1, 0.87, 0.65)
    # below LARGE_VALIDATION, or for ROC-AUC, or without num_val: prior-first alone, only the chosen grid read
    for kw in ({"num_val": n - 1}, {"num_val": n, "metric": "roc_auc"}, {}):
        asked.clear()
        assert S.prior_first([0.65, 0.71, 0.70], cands, **kw) == S.Choice(1, 1, 0.75, 0.71) and asked == [1]
    # a gap inside the margin keeps the prior-first choice
    grid[0] = [0.76]
    assert S.prior_first([0.65, 0.71, 0.70], cands, num_val=n) == S.Choice(1, 1, 0.75, 0.71)
    # the margin shrinks with n: 0.76 vs 0.75 clears 3 standard errors at 1e6 nodes (0.0018)
    assert S.prior_first([0.65, 0.71, 0.70], cands, num_val=10**6) == S.Choice(0, 0, 0.76, 0.65)
    # several clear it: the highest; a single given prior (keep_prior False) has no other predictor
    grid[2] = [0.80]
    assert S.prior_first([0.65, 0.71, 0.70], cands, num_val=10**6) == S.Choice(2, 0, 0.80, 0.70)
    assert S.prior_first([0.71], lambda i: [0.75], keep_prior=False, num_val=10**6) == S.Choice(0, 0, 0.75, 0.71)


def test_prior_first_leaves_out_the_other_grids_that_would_end_past_the_deadline(monkeypatch):
    """Under ``deadline`` the large-validation step computes another predictor's candidates only while the chosen
    predictor's took (10 s on a fake clock) still fits before it; ``decide`` overrides the clock's answer (the
    runner's memo); the left-out ones are named in Choice.left_out, in order."""
    clock = {"t": 0.0}
    monkeypatch.setattr(S.time, "perf_counter", lambda: clock["t"])
    asked = []

    def cands(i):
        asked.append(i)
        clock["t"] += 10.0
        return {0: [0.90], 1: [0.75], 2: [0.80]}[i]

    n = S.LARGE_VALIDATION
    for deadline, want_asked, left_out in ((15.0, [1], (0, 2)), (25.0, [1, 0], (2,)), (None, [1, 0, 2], ())):
        clock["t"], asked[:] = 0.0, []
        c = S.prior_first([0.65, 0.71, 0.70], cands, num_val=n, deadline=deadline)
        assert asked == want_asked and c.left_out == left_out
        assert (c.prior, c.score) == ((1, 0.75) if 0 in left_out else (0, 0.90))
    clock["t"], asked[:] = 0.0, []
    seen = []
    c = S.prior_first([0.65, 0.71, 0.70], cands, num_val=n, deadline=15.0,
                      decide=lambda i, fits: seen.append((i, fits())) or i == 2)
    assert seen == [(0, False), (2, False)] and asked == [1, 2] and c.left_out == (0,) and c.prior == 2


def test_the_runners_rule_maps_a_switch_to_the_other_predictors_candidate_key(monkeypatch):
    """candidates.select_prior_first: with the large-validation step, the key returned is that of the other predictor's
    best CLP candidate (its pending grid computed), and without it that grid is never computed."""
    y, vm = np.zeros(10, int), np.ones(10, bool)

    def scoring(m):  # (10, 2) beliefs with accuracy m / 10 (class 0 on the first m nodes)
        b = np.zeros((10, 2), np.float32)
        b[:m, 0], b[m:, 1] = 1.0, 1.0
        return b

    def cands():
        return candidates.Candidates({("base_prior", "mlp", "alpha", 0.0): scoring(6),
                                      ("base_prior", "link", "alpha", 0.0): scoring(7)},
                                     references={"mlp": scoring(6), "link": scoring(7)},
                                     rule=candidates.select_prior_first,
                                     pending={("base_prior", "mlp"): lambda: {("alpha", 0.5): scoring(9),
                                                                              ("alpha", 0.9): scoring(8)},
                                              ("base_prior", "link"): lambda: {("alpha", 0.5): scoring(7),
                                                                               ("alpha", 0.9): scoring(8)}})

    c = cands()
    assert candidates.select_prior_first(c, y, vm, "accuracy") == (("base_prior", "link", "alpha", 0.9),
                                                                    pytest.approx(0.8))
    assert ("base_prior", "mlp") in c.pending  # the unchosen grid was never computed
    monkeypatch.setattr(S, "LARGE_VALIDATION", 10)
    monkeypatch.setattr(S, "MARGIN_SE", 0.0)
    c = cands()
    assert candidates.select_prior_first(c, y, vm, "accuracy") == (("base_prior", "mlp", "alpha", 0.5),
                                                                    pytest.approx(0.9))
    assert not c.pending


def test_validation_scores_are_the_metric_on_validation_nodes():
    y = np.array([0, 1, 1, 0, -1])
    vm = np.array([True, True, True, False, False])
    b = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.0, 1.0], [0.5, 0.5]], np.float32)
    np.testing.assert_allclose(S.validation_scores("accuracy", b[None], y, vm), [2 / 3])
    np.testing.assert_allclose(S.validation_scores("accuracy", [b, b[:, ::-1]], y, vm), [2 / 3, 1 / 3])
    # ROC-AUC on class 1's probability: positives {0.8, 0.4} vs negative {0.1}: both ranked above
    np.testing.assert_allclose(S.validation_scores("roc_auc", [b], y, vm), [1.0])


@pytest.mark.parametrize("h, seed, epochs, large", [(0.1, 0, 30, False), (0.9, 2, 3, False), (0.05, 1, 3, False),
                                                    (0.3, 3, 3, True)])
def test_the_estimator_and_the_runner_choose_the_same(h, seed, epochs, large, monkeypatch):
    """By construction: on the same priors and CLP grid, jaxclp.CLP(prior=[...]) and the runner's clp make the same
    choice (predictor, whether to propagate, alpha) and return the same beliefs (``large``: with the
    large-validation step on, every predictor's grid read)."""
    if large:  # every validation set is "large" and any higher score switches: the path where grids are re-read
        monkeypatch.setattr(S, "LARGE_VALIDATION", 1)
        monkeypatch.setattr(S, "MARGIN_SE", 0.0)
    ds = jaxclp.datasets.synthetic(h, 4, num_classes=3, nodes_per_class=40, seed=seed)
    sp = runner.get_splits(ds, "medium", 1, seed)
    feats, _ = runner.node_features(ds)
    setup = runner.prepare_splits(ds, feats, sp, 1, [0], seed, jaxclp.TrainConfig(epochs=epochs), True)
    ctx = setup.context(0)
    variants = tuple((norm, False, src) for norm in ("sym", "row") for src in ("mlp", "b0"))  # the estimator's order
    cands = M.method_clp_prior(ctx, priors=("mlp", "link"), variants=variants, authors=False, spectral=False)
    key, val = cands.rule(cands, np.asarray(ctx.labels), np.asarray(ctx.val), ctx.metric)
    priors = [np.asarray(cands.references[n]) for n in ("mlp", "link")]
    est = jaxclp.CLP(prior=priors, normalization=["sym", "row"], prior_source=["mlp", "b0"],
                     alphas=M.ALPHAS, num_classes=3)
    est.fit(ds.graph, None, np.asarray(ctx.labels), np.asarray(ctx.train), np.asarray(ctx.val))
    assert ["mlp", "link"][est.prior_index_] == key[1]
    assert est.propagated_ == (key[2:] != ("alpha", 0.0))
    assert est.alpha_ == key[-1]
    np.testing.assert_allclose(est.val_score_, val, atol=1e-6)
    if est.propagated_:
        assert (est.normalization_, est.prior_source_) == (key[3], key[7])
        np.testing.assert_allclose(np.asarray(est.beliefs_), np.asarray(cands[key]), rtol=1e-4, atol=1e-6)


def test_clp_time_limit_skips_the_expensive_priors_of_a_list(monkeypatch):
    """jaxclp.CLP(time_limit=...): priors fitted in order while PRIOR_COST x seconds-per-unit fits the time left (a
    fake clock: every fit takes PRIOR_COST seconds per unit of 2 s); the skipped ones are named."""
    import jaxclp.priors as P

    ds = jaxclp.datasets.synthetic(0.3, 4, num_classes=3, nodes_per_class=20, seed=0)
    y = np.asarray(ds.labels)
    tm = np.arange(y.size) % 3 == 0
    vm = np.arange(y.size) % 3 == 1
    clock = {"t": 0.0}
    fitted = []
    real = P.fit_prior

    def fake_fit(src, key, graph, features, labels, train, val, k, cfg, **kw):
        fitted.append(src)
        clock["t"] += 2.0 * search.PRIOR_COST[src]
        return real(np.full((y.size, 3), 1 / 3), key, graph, None, labels, train, val, k, cfg)

    monkeypatch.setattr(jaxclp.estimator, "fit_prior", fake_fit)
    monkeypatch.setattr(search.time, "perf_counter", lambda: clock["t"])
    est = jaxclp.CLP(prior=("link", "gcn", "h2gcn", "gcn_tuned"), time_limit=10.0, num_classes=3)
    x = np.random.default_rng(0).normal(size=(y.size, 4)).astype(np.float32)
    est.fit(ds.graph, x, y, tm, vm)
    # t = 1 (link), 3 (gcn), 7 (h2gcn); gcn_tuned's 6 x 2 s exceed the 3 s left
    assert fitted == ["link", "gcn", "h2gcn"] and est.skipped_priors_ == ["gcn_tuned"]
    assert len(est.prior_val_scores_) == 3
    fitted.clear()
    assert not jaxclp.CLP(prior=("link", "gcn"), num_classes=3).fit(ds.graph, x, y, tm, vm).skipped_priors_
    assert sorted(fitted) == ["gcn", "link"]  # no limit: every prior, side by side (jaxclp.fit_threads)
    # a tuned GNN started stops training where the limit runs out: the deadline (start + limit) goes to it alone
    seen = []

    def fake_cut(src, key, graph, features, labels, train, val, k, cfg, **kw):
        seen.append((src, kw.get("deadline")))
        res = real(np.full((y.size, 3), 1 / 3), key, graph, None, labels, train, val, k, cfg)
        return res._replace(name=src, stopped_at=25 if "deadline" in kw else None)

    monkeypatch.setattr(jaxclp.estimator, "fit_prior", fake_cut)
    clock["t"] = 50.0
    est = jaxclp.CLP(prior=("gcn_tuned", "link"), time_limit=0.0, num_classes=3).fit(ds.graph, x, y, tm, vm)
    # named in the order it happened, as the runner's clp names them (one jaxclp.search.Search for both)
    assert seen == [("gcn_tuned", 50.0)] and est.skipped_priors_ == ["gcn_tuned epochs after 25", "link"]
    with pytest.raises(ValueError, match="time_limit must be a number of seconds >= 0, or None for no limit"):
        jaxclp.CLP(time_limit=-1)


def test_clp_time_limit_leaves_out_the_other_priors_grids_that_would_end_past_it(monkeypatch):
    """jaxclp.CLP(prior=[...], time_limit=...) with the large-validation step: CLP's grid on another prior is
    computed only while the chosen prior's grid time fits the time left (a fake clock: every grid takes 10 s);
    one left out is named in skipped_priors_."""
    import time as _time

    monkeypatch.setattr(S, "LARGE_VALIDATION", 1)
    ds = jaxclp.datasets.synthetic(0.3, 4, num_classes=3, nodes_per_class=20, seed=0)
    rng = np.random.default_rng(0)
    priors = [rng.dirichlet(np.ones(3), ds.num_nodes) for _ in range(2)]
    y = np.asarray(ds.labels)
    tm, vm = np.arange(y.size) % 3 == 0, np.arange(y.size) % 3 == 1
    clock = {"t": 0.0}
    real = jaxclp.CLP._candidates

    def slow(self, *args, **kwargs):
        clock["t"] += 10.0
        return real(self, *args, **kwargs)

    monkeypatch.setattr(jaxclp.CLP, "_candidates", slow)
    monkeypatch.setattr(_time, "perf_counter", lambda: clock["t"])
    for limit, left_out in ((15.0, 1), (25.0, 0)):
        clock["t"] = 0.0
        est = jaxclp.CLP(prior=priors, time_limit=limit, num_classes=3).fit(ds.graph, None, y, tm, vm)
        assert len([s for s in est.skipped_priors_ if s.startswith("clp on ")]) == left_out
        assert clock["t"] == 10.0 * (2 - left_out)
