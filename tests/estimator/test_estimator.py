"""The CLP estimator (jaxclp.estimator, ``jaxclp.CLP``): its priors and options, and validation-only selection."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxclp
from files import features_graph
from jaxclp.nonlinear import nonlinear_grid

FAST = dict(epochs=60, patience=20)


def test_estimator_selects_on_validation_only():
    g, x, y, tm, vm = features_graph(h=0.0)
    kw = dict(normalization=["sym", "none"], l1_normalize=[False, True], alphas=(0.3, 0.9), **FAST)
    m1 = jaxclp.CLP(**kw).fit(g, x, y, tm, vm)
    y_scrambled = np.where(tm | vm, y, (y + 1) % 3)  # only test labels differ
    m2 = jaxclp.CLP(**kw).fit(g, x, y_scrambled, tm, vm)
    assert (m1.alpha_, m1.normalization_, m1.l1_normalize_) == (m2.alpha_, m2.normalization_, m2.l1_normalize_)
    np.testing.assert_array_equal(m1.predict(), m2.predict())
    assert m1.alpha_ in m1.alphas
    assert m1.val_score_ == max(m1.val_scores_.values())
    p = np.asarray(m1.predict_proba())
    np.testing.assert_allclose(p.sum(1), 1, atol=1e-6)
    assert m1.H_.shape == (3, 3) and m1.spectral_.rho.shape == (3,)


@pytest.mark.cpu_bitwise
def test_estimator_without_masks_holds_out_labelled_nodes():
    """``fit(graph, x, labels)`` with -1 for unlabelled nodes: the masks are
    ``jaxclp.datasets.holdout_split(labels, val_fraction, seed)``, and the fit equals one given those masks."""
    g, x, y, _, _ = features_graph()
    y_part = np.where(np.random.default_rng(1).random(y.size) < 0.6, -1, y)  # 40 % labelled
    kw = dict(alphas=(0.3, 0.9), seed=4, **FAST)
    m = jaxclp.CLP(**kw).fit(g, x, y_part, val_fraction=0.25)
    tm, vm = jaxclp.datasets.holdout_split(y_part, 0.25, 4)
    np.testing.assert_array_equal(m.train_mask_, tm)
    np.testing.assert_array_equal(m.val_mask_, vm)
    assert np.array_equal(tm | vm, y_part != -1)
    assert vm.sum() == sum(round(0.25 * (y_part == c).sum()) for c in range(3))  # stratified by class
    m2 = jaxclp.CLP(**kw).fit(g, x, y_part, tm, vm)
    np.testing.assert_array_equal(np.asarray(m.beliefs_), np.asarray(m2.beliefs_))
    assert (m.predict()[y_part == -1] == y[y_part == -1]).mean() > 0.5  # the unlabelled nodes, 3 classes
    with pytest.raises(ValueError, match="pass both train_mask and val_mask, or neither"):
        jaxclp.CLP(**kw).fit(g, x, y_part, tm)


def test_estimator_with_given_prior_matches_clp_beliefs():
    g, x, y, tm, vm = features_graph()
    rng = np.random.default_rng(3)
    prior = jnp.asarray(rng.dirichlet(np.ones(3), len(y)))
    m = jaxclp.CLP(alphas=(0.5,)).fit(g, None, y, tm, vm, prior=prior)
    res = jaxclp.clp_beliefs(g, prior, jnp.asarray(y), jnp.asarray(tm), alphas=(0.5,))
    np.testing.assert_allclose(m.beliefs_, res.beliefs[0], atol=1e-10)
    # spectral_ is computed on first access (fit skips the power iteration), equal to clp_beliefs' own
    assert m._spectral is None
    for field in ("rho", "upper", "row_sum_bound", "col_sum_bound", "iterations"):
        np.testing.assert_allclose(np.asarray(getattr(m.spectral_, field)), np.asarray(getattr(res.spectral, field)),
                                   rtol=1e-12, err_msg=field)
    assert m._spectral is m.spectral_  # cached


@pytest.mark.parametrize("mutate, match", [
    (lambda a: a.update(tm=np.zeros_like(a["tm"])), "train_mask is empty"),
    (lambda a: a.update(y=np.where(a["tm"], 7, a["y"])), "labels on train/val nodes must be one of classes"),
    (lambda a: a.update(y=np.zeros_like(a["y"])), "K = 2"),
    (lambda a: a.update(vm=a["tm"].copy()), "overlap"),
    (lambda a: a["x"].__setitem__((0, 0), np.nan), "NaN"),
    (lambda a: a.update(tm=a["tm"][:-1]), "shape"),
])
def test_estimator_bad_input(mutate, match):
    g, x, y, tm, vm = features_graph()
    args = dict(x=x.copy(), y=y.copy(), tm=tm.copy(), vm=vm.copy())
    mutate(args)
    with pytest.raises(ValueError, match=match):
        jaxclp.CLP(num_classes=None if match == "K = 2" else 3, **FAST).fit(
            g, args["x"], args["y"], args["tm"], args["vm"])


# ------------------------------------------------------------------------------------- CLP(prior=...)
@pytest.mark.cpu_bitwise
def test_prior_mlp_is_the_default_exactly():
    g, x, y, tm, vm = features_graph()
    kw = dict(normalization=["sym", "row"], alphas=(0.3, 0.9), **FAST)
    default = jaxclp.CLP(**kw).fit(g, x, y, tm, vm)
    named = jaxclp.CLP(prior="mlp", **kw).fit(g, x, y, tm, vm)
    np.testing.assert_array_equal(np.asarray(default.beliefs_), np.asarray(named.beliefs_))
    assert default.val_scores_ == named.val_scores_ and named.prior_name_ == "mlp"
    # ... and it is the paper's pipeline: fit_mlp with the seed's key, then CLP on that array
    ref = jaxclp.fit_mlp(jax.random.key(0), x, jnp.asarray(y), jnp.asarray(tm), jnp.asarray(vm), num_classes=3,
                         cfg=jaxclp.TrainConfig(**FAST))
    np.testing.assert_array_equal(np.asarray(named.mlp_.prior), np.asarray(ref.prior))
    assert named.prior_fit_.best_epoch == int(ref.info.best_epoch)
    on_array = jaxclp.CLP(prior=np.asarray(ref.prior), **kw).fit(g, None, y, tm, vm)
    np.testing.assert_array_equal(np.asarray(on_array.beliefs_), np.asarray(named.beliefs_))
    assert on_array.mlp_ is None and on_array.prior_name_ == "array"


@pytest.mark.cpu_bitwise
def test_prior_named_and_predict_proba():
    g, x, y, tm, vm = features_graph()
    m = jaxclp.CLP(prior="linkx", prior_options={"hidden": 16}, alphas=(0.5,), **FAST).fit(g, x, y, tm, vm)
    ref = jaxclp.priors.linkx_prior(jax.random.key(0), g, x, jnp.asarray(y), jnp.asarray(tm), jnp.asarray(vm), 3,
                                    jaxclp.TrainConfig(**FAST), hidden=16)
    np.testing.assert_array_equal(np.asarray(m.prior_), np.asarray(ref.prior))
    assert m.prior_fit_.name == "linkx" and m.mlp_ is None

    # user label values 3, 7, 99; the estimator saw 99 and 3 only and orders its columns its own way
    y_user = np.array([3, 7, 99])[y]
    seen = []

    class Est:
        classes_ = np.array([99, 3])

        def predict_proba(self, feats):
            seen.append(feats)
            return np.tile([0.6, 0.4], (len(feats), 1))

    m = jaxclp.CLP(prior=Est(), alphas=(0.5,)).fit(g, x, y_user, tm, vm)
    assert seen[0] is x  # called on the user's features, untouched
    np.testing.assert_allclose(np.asarray(m.prior_), np.tile([0.4, 0.0, 0.6], (len(y), 1)))
    ref = jaxclp.clp_beliefs(g, jnp.tile(jnp.asarray([0.4, 0.0, 0.6]), (len(y), 1)), jnp.asarray(y),
                             jnp.asarray(tm), alphas=(0.5,))
    np.testing.assert_allclose(np.asarray(m.beliefs_), np.asarray(ref.beliefs[0]), atol=1e-12)


@pytest.mark.parametrize("prior, match, at_fit", [
    ("mpl", "prior must be one of", False),
    (3, "prior must be one of", False),
    (None, "prior must be one of", False),
    (np.full((300, 3), 0.5), "prior rows must sum to 1", True),
    (np.full((300, 2), 0.5), r"prior must have shape \(300, 3\)", True),
    (-np.full((300, 3), 1 / 3), "prior must be nonnegative", True),
])
def test_prior_bad_input(prior, match, at_fit):
    g, x, y, tm, vm = features_graph()
    with pytest.raises(ValueError, match=match):
        jaxclp.CLP(prior=prior, **FAST).fit(g, x, y, tm, vm)
    if not at_fit:
        with pytest.raises(ValueError, match=match):
            jaxclp.CLP(prior=prior)
    with pytest.raises(ValueError, match="features is None"):
        jaxclp.CLP(prior="linkx", **FAST).fit(g, None, y, tm, vm)
    with pytest.raises(ValueError, match="prior_options apply to a named prior only"):
        jaxclp.CLP(prior=np.full((300, 3), 1 / 3), prior_options={"hidden": 8})


def test_prior_docstring_example_runs():
    import textwrap

    doc = jaxclp.CLP.__doc__
    block = doc.split("Runnable::\n", 1)[1].split("\n    Args:", 1)[0]
    ns = {}
    exec(compile(textwrap.dedent(block), "CLP.__doc__", "exec"), ns)
    assert ns["m_linkx"].prior_name_ == "linkx" and ns["m_arr"].prior_name_ == "array"
    assert ns["m_obj"].prior_name_ == "predict_proba" and ns["m_obj"].predict().shape == (120,)


def _noisy_prior(y, k, flip, seed):
    """(n, K) prior: the true class with weight 0.6 on a random (1 - flip) share of nodes, a wrong one elsewhere."""
    rng = np.random.default_rng(seed)
    wrong = rng.random(len(y)) < flip
    top = np.where(wrong, (y + 1 + rng.integers(0, k - 1, len(y))) % k, y)
    return (0.4 / k + 0.6 * np.eye(k)[top]).astype(np.float64)


def _val_accuracy(d, y, vm):
    return float((d.argmax(1) == y)[vm].mean())


@pytest.mark.cpu_bitwise
def test_prior_list_chooses_the_best_prior_on_validation_then_keeps_clp_only_if_it_beats_it():
    g, x, y, tm, vm = features_graph(h=0.9)
    k, fast = 3, dict(alphas=(0.5, 0.9, 0.99), spectral_scale=True)
    weak, good = _noisy_prior(y, k, 0.5, 1), _noisy_prior(y, k, 0.3, 2)
    scores = [_val_accuracy(weak, y, vm), _val_accuracy(good, y, vm)]
    assert scores[1] > scores[0]  # the hand-computed choice
    m = jaxclp.CLP(prior=[weak, good], **fast).fit(g, None, y, tm, vm)
    assert m.prior_index_ == 1
    np.testing.assert_allclose([s for _, s in m.prior_val_scores_], scores, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(m.prior_), good)
    # homophilous graph, 30 % wrong prior, rho-scaled operators: CLP beats the prior on validation (0.73 -> 0.91),
    # and the result is then the single-prior fit's
    single = jaxclp.CLP(prior=good, **fast).fit(g, None, y, tm, vm)
    assert single.val_score_ > scores[1] + 0.1
    assert m.propagated_ and single.propagated_ and m.spectral_scale_
    assert m.alpha_ == single.alpha_ and m.val_score_ == single.val_score_
    np.testing.assert_array_equal(np.asarray(m.beliefs_), np.asarray(single.beliefs_))
    # the paper's unscaled operators (rho << 1) leave the argmax of this prior unchanged: a tie, which goes to
    # the prior (scored like CLP's configurations, so float32 rounding cannot break the tie)
    tie = jaxclp.CLP(prior=[good], alphas=(0.5, 0.9)).fit(g, None, y, tm, vm)
    assert not tie.propagated_ and tie.alpha_ == 0.0 and tie.val_score_ == tie.prior_val_scores_[0][1]
    np.testing.assert_allclose(np.asarray(tie.predict_proba()), good, rtol=1e-12)  # rows renormalized
    # ... while a single prior is always propagated
    assert jaxclp.CLP(prior=good, alphas=(0.5, 0.9)).fit(g, None, y, tm, vm).alpha_ in (0.5, 0.9)
    # a prior exact on validation cannot be beaten there: the prior alone is kept, the first of two equal ones
    exact = np.where(vm[:, None], np.eye(k)[y], good)
    m = jaxclp.CLP(prior=(good, exact, exact.copy()), **fast).fit(g, None, y, tm, vm)
    assert m.prior_index_ == 1 and m.prior_val_scores_[1][1] == 1.0
    assert not m.propagated_ and m.alpha_ == 0.0 and m.val_score_ == 1.0
    np.testing.assert_allclose(np.asarray(m.predict_proba()), exact, rtol=1e-12)
    np.testing.assert_array_equal(m.predict(), exact.argmax(1))


def test_spectral_scale_option_is_clp_beliefs_with_scaled_operators():
    g, x, y, tm, vm = features_graph(h=0.9)
    d = _noisy_prior(y, 3, 0.3, 2)
    m = jaxclp.CLP(prior=d, alphas=(0.5, 0.99), spectral_scale=[False, True]).fit(g, None, y, tm, vm)
    ref = jaxclp.clp_beliefs(g, jnp.asarray(d), jnp.asarray(y), jnp.asarray(tm), alphas=(0.5, 0.99),
                             spectral_scale=True, spectrum=False)
    scores = [_val_accuracy(np.asarray(b), y, vm) for b in ref.beliefs]
    assert set(m.val_scores_) == {("sym", False, "mlp", s, a) for s in (False, True) for a in (0.5, 0.99)}
    np.testing.assert_allclose([m.val_scores_[("sym", False, "mlp", True, a)] for a in (0.5, 0.99)], scores,
                               rtol=1e-6)
    assert m.spectral_scale_ and m.alpha_ == (0.5, 0.99)[int(np.argmax(scores))]
    np.testing.assert_allclose(np.asarray(m.beliefs_), np.asarray(ref.beliefs[int(np.argmax(scores))]), rtol=1e-6)
    with pytest.raises(ValueError, match="spectral_scale must be a bool"):
        jaxclp.CLP(spectral_scale="yes")
    # linear update only: a grid skips scaled x per-step L1; asked for alone, it is refused
    m = jaxclp.CLP(prior=d, alphas=(0.5,), l1_normalize=[False, True], spectral_scale=[False, True]).fit(
        g, None, y, tm, vm)
    assert set(m.val_scores_) == {("sym", False, "mlp", False, 0.5), ("sym", True, "mlp", False, 0.5),
                                  ("sym", False, "mlp", True, 0.5)}
    with pytest.raises(ValueError, match="linear variant only"):
        jaxclp.CLP(prior=d, alphas=(0.5,), l1_normalize=True, spectral_scale=True).fit(g, None, y, tm, vm)


def test_prior_list_forms():
    g, x, y, tm, vm = features_graph()
    d = _noisy_prior(y, 3, 0.3, 0)
    # named priors and arrays mix; every prior is fitted from the same key
    m = jaxclp.CLP(prior=("mlp", d), alphas=(0.5,), **FAST).fit(g, x, y, tm, vm)
    assert [name for name, _ in m.prior_val_scores_] == ["mlp", "array"]
    alone = jaxclp.CLP(prior="mlp", alphas=(0.5,), **FAST).fit(g, x, y, tm, vm)
    assert m.prior_val_scores_[0][1] == pytest.approx(alone.prior_fit_.val_score, rel=1e-6)
    # nested lists of numbers are one (n, K) array, not a list of priors
    m = jaxclp.CLP(prior=d.tolist(), alphas=(0.5,)).fit(g, None, y, tm, vm)
    assert m.prior_name_ == "array" and len(m.prior_val_scores_) == 1 and m.propagated_
    with pytest.raises(ValueError, match="prior_options apply to a single named prior only"):
        jaxclp.CLP(prior=("mlp", "link"), prior_options={"hidden": 8})
    with pytest.raises(ValueError, match="prior must be one of"):
        jaxclp.CLP(prior=("mlp", "mlpp"))
    with pytest.raises(ValueError, match="prior_options apply to a single named prior only"):
        jaxclp.CLP(prior="linkx", prior_options={"hidden": 8}).fit(g, x, y, tm, vm, prior=("mlp", "linkx"))


@pytest.mark.cpu_bitwise
def test_nonlinear_option_adds_the_nonlinear_grid_and_takes_it_only_when_better():
    g, x, y, tm, vm = features_graph(h=0.9)
    d = _noisy_prior(y, 3, 0.3, 2)
    m = jaxclp.CLP(prior=d, alphas=(0.5, 0.9), nonlinear=True).fit(g, None, y, tm, vm)
    ref = nonlinear_grid(g, jnp.asarray(d), jnp.asarray(y), jnp.asarray(tm), jnp.asarray(vm), echo=(False,))
    ref_scores = [_val_accuracy(np.asarray(b), y, vm) for b in ref.beliefs]
    keys = [("nonlinear", s, a, p, e, w) for s, a, p, e, w in ref.configs]
    assert len(ref.configs) == 4 * 10 * 2 * 2  # starts x alphas 0.1..1 x posts x weights, echo off
    np.testing.assert_allclose([m.val_scores_[k] for k in keys], ref_scores, rtol=1e-6)
    linear = max(v for k, v in m.val_scores_.items() if k[0] != "nonlinear")
    j = int(np.argmax(ref_scores))
    assert max(ref_scores) > linear + 0.1  # on this graph the nonlinear step moves the prior, the paper's does not
    start, a, post, echo, w = ref.configs[j]
    assert m.nonlinear_ == {"start": start, "post": post, "echo": False, "weight": w, "layer": int(ref.layer[j])}
    assert (m.alpha_, m.prior_source_, m.normalization_, m.method_) == (a, start, f"nonlinear-{w}", "nonlinear")
    assert m.val_score_ == pytest.approx(ref_scores[j], rel=1e-6)
    np.testing.assert_array_equal(np.asarray(m.beliefs_), np.asarray(ref.beliefs[j]))
    assert np.all(np.isfinite(np.asarray(m.spectral_.rho)))  # the operator of the chosen adjacency weight
    # one weak configuration (1 layer, alpha 0.1, from the prior) ties the paper's update: ties keep the latter
    m2 = jaxclp.CLP(prior=d, alphas=(0.5, 0.9), nonlinear={"starts": ("prior",), "alphas": (0.1,),
                                                          "posts": ("clamp",), "weights": ("none",),
                                                          "num_layers": 1}).fit(g, None, y, tm, vm)
    plain = jaxclp.CLP(prior=d, alphas=(0.5, 0.9)).fit(g, None, y, tm, vm)
    assert m2.val_scores_[("nonlinear", "prior", 0.1, "clamp", False, "none")] == plain.val_score_
    assert m2.nonlinear_ is None and m2.method_ == plain.method_
    assert (m2.alpha_, m2.normalization_, m2.val_score_) == (plain.alpha_, plain.normalization_, plain.val_score_)
    np.testing.assert_array_equal(np.asarray(m2.beliefs_), np.asarray(plain.beliefs_))
    with pytest.raises(ValueError, match="nonlinear must be a bool or a dict"):
        jaxclp.CLP(nonlinear="yes")
    with pytest.raises(ValueError, match=r"nonlinear: unknown jaxclp.nonlinear.nonlinear_grid option\(s\) \['alpha'\]"):
        jaxclp.CLP(nonlinear={"alpha": (0.1,)})
    from jax.sharding import Mesh

    sg = jaxclp.shard_graph(g, Mesh(np.array(jax.devices()[:1]), ("nodes",)), "nodes")
    with pytest.raises(ValueError, match="nonlinear=True needs the unsharded graph"):
        jaxclp.CLP(prior=d, alphas=(0.5,), nonlinear=True).fit(sg, None, y, tm, vm)


def test_unfitted_estimator_raises_not_fitted_error():
    """scikit-learn's convention: predict/predict_proba/spectral_ before fit raise NotFittedError, a ValueError and
    an AttributeError (so hasattr(model, "spectral_") is False); a fit that raised leaves the estimator unfitted."""
    g, x, y, tr, va = features_graph()
    model = jaxclp.CLP(alphas=(0.5,), num_classes=3)
    for call in (model.predict, model.predict_proba, lambda: model.spectral_):
        with pytest.raises(jaxclp.NotFittedError, match="not fitted yet"):
            call()
    assert not hasattr(model, "spectral_")
    assert issubclass(jaxclp.NotFittedError, ValueError) and issubclass(jaxclp.NotFittedError, AttributeError)
    prior = jnp.asarray(np.random.default_rng(3).dirichlet(np.ones(3), len(y)))
    model.fit(g, None, y, tr, va, prior=prior)
    assert model.predict().shape == (g.num_nodes,)
    with pytest.raises(ValueError, match="overlap"):
        model.fit(g, None, y, tr, tr, prior=prior)
    with pytest.raises(jaxclp.NotFittedError):
        model.predict()


CLP_STAGE_PROGRAMS = {"jit(_estimate)", "jit(_clp_factors)", "jit(norm_bounds)", "jit(_solve_kernel)", "jit(_power)",
                      "jit(iterate)", "jit(_ops_jit)", "jit(_grid_kernel)"}
"""The programs of CLP's candidates: compatibility, operators, bounds, solves, the L1 iteration, the nonlinear grid."""


def test_shape_buckets_compute_clps_candidates_on_the_padded_graph():
    """``CLP(shape_buckets=True)`` computes every candidate (variants, spectral scaling, L1, the nonlinear step) on
    the graph padded to its bucket: the same validation scores and choice as on the graph's own shapes, beliefs to
    float rounding, ``spectral_`` computed on the graph itself; a second graph of the same node and edge bucket
    compiles none of the CLP stage's programs, which the same fit on exact shapes compiles again."""
    import collections

    from files import noisy_prior_problem

    from jaxclp import buckets

    names = collections.Counter()

    def on_compile(event, secs, **kw):
        if event == "/jax/core/compile/backend_compile_duration":
            names[kw.get("fun_name")] += 1

    # a fixed solver: "auto" picks a solver per operator from its bounds and size, i.e. per graph
    grid = dict(alphas=(0.3, 0.6, 0.9), normalization=["sym", "row"], l1_normalize=[False, True],
                spectral_scale=[False, True], nonlinear=True, method="bicgstab")
    g, y, tm, vm, prior = noisy_prior_problem(3, 306, 3)
    exact = jaxclp.CLP(**grid).fit(g, None, y, tm, vm, prior=prior)
    padded = jaxclp.CLP(shape_buckets=True, **grid).fit(g, None, y, tm, vm, prior=prior)
    assert padded.val_scores_ == exact.val_scores_ and len(exact.val_scores_) > 40
    for attr in ("alpha_", "normalization_", "l1_normalize_", "spectral_scale_", "nonlinear_", "prior_source_"):
        assert getattr(padded, attr) == getattr(exact, attr), attr
    assert padded.beliefs_.shape == (306, 3)
    np.testing.assert_allclose(np.asarray(padded.beliefs_), np.asarray(exact.beliefs_), atol=1e-6)
    np.testing.assert_allclose(np.asarray(padded.H_), np.asarray(exact.H_), atol=1e-9)
    for field in ("rho", "lower", "upper"):
        np.testing.assert_allclose(np.asarray(getattr(padded.spectral_, field)),
                                   np.asarray(getattr(exact.spectral_, field)), rtol=1e-9, err_msg=field)
    g2, y2, tm2, vm2, prior2 = noisy_prior_problem(4, 312, 3)
    p1, p2 = buckets.propagation_graph(g), buckets.propagation_graph(g2)
    assert (p1.num_nodes, p1.senders.shape) == (p2.num_nodes, p2.senders.shape)  # one bucket, nodes and edges
    jax.monitoring.register_event_duration_secs_listener(on_compile)
    try:
        jaxclp.CLP(shape_buckets=True, **grid).fit(g2, None, y2, tm2, vm2, prior=prior2)
        on_buckets = set(names)
        names.clear()
        jaxclp.CLP(**grid).fit(g2, None, y2, tm2, vm2, prior=prior2)
        on_exact = set(names)
    finally:
        jax.monitoring.unregister_event_duration_listener(on_compile)
    assert not on_buckets & CLP_STAGE_PROGRAMS, on_buckets & CLP_STAGE_PROGRAMS
    assert on_exact >= {"jit(_estimate)", "jit(_solve_kernel)", "jit(_grid_kernel)"}, on_exact
