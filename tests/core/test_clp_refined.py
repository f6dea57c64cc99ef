"""CLP with the compatibility re-estimated once from the propagated beliefs (``compat="refined"``)."""

import functools

import jax.numpy as jnp
import numpy as np
import pytest

import reference as ref
import jaxclp
from jaxclp.clp import refined_prior

N, K = 16, 3


@functools.lru_cache(maxsize=None)
def _graph(directed):
    rng = np.random.default_rng(31 if directed else 32)
    pairs = set()
    while len(pairs) < 36:
        s, r = (int(v) for v in rng.integers(0, N, 2))
        if s != r:
            pairs.add((s, r))
    return jaxclp.Graph.from_edge_index(np.array(sorted(pairs)).T, N, symmetrize=not directed)


def _problem(seed=7):
    prior, labels, mask = ref.random_problem(np.random.default_rng(seed), N, K, train_frac=0.4, peaked=2.0)
    return prior, labels, mask


def _run(g, prior, labels, mask, **kw):
    return jaxclp.clp_beliefs(g, jnp.asarray(prior), jnp.asarray(labels), jnp.asarray(mask), **kw)


@pytest.mark.cpu_bitwise
def test_sinkhorn_is_the_default_exactly():
    g = _graph(False)
    prior, labels, mask = _problem()
    for kw in (dict(), dict(normalization="row", prior_source="b0"), dict(l1_normalize=True),
               dict(spectral_scale=True)):
        a = _run(g, prior, labels, mask, alphas=(0.3, 0.8), **kw)
        b = _run(g, prior, labels, mask, alphas=(0.3, 0.8), compat="sinkhorn", **kw)
        np.testing.assert_array_equal(np.asarray(a.beliefs), np.asarray(b.beliefs))
        np.testing.assert_array_equal(np.asarray(a.H), np.asarray(b.H))
        assert a.H_refined is None and b.H_refined is None and a.method == b.method


@pytest.mark.cpu_bitwise
@pytest.mark.parametrize("directed,normalization", [(False, "sym"), (True, "row"), (False, "none")])
def test_refined_matches_numpy(directed, normalization):
    """H'(alpha) = Sinkhorn((M*Y)^T A B1), B1 = M*Y + (1-M) L1rows(B(alpha)), and the refined beliefs are the
    dense closed form (1-a)(I - a A^F'_k)^{-1} D with A^F' from the paper's B0 and H'(alpha)."""
    g = _graph(directed)
    prior, labels, mask = _problem()
    alphas = (0.05, 0.1) if normalization == "none" else (0.2, 0.5, 0.9)
    res = _run(g, prior, labels, mask, alphas=alphas, normalization=normalization, method="dense",
               compat="refined")
    first = _run(g, prior, labels, mask, alphas=alphas, normalization=normalization, method="dense")
    assert res.H_refined.shape == (len(alphas), K, K)
    np.testing.assert_array_equal(np.asarray(res.H), np.asarray(first.H))  # H stays the first-pass estimate
    a_raw = ref.graph_dense(g)
    ahat = ref.normalize(a_raw, normalization)
    b0 = ref.initial_beliefs(prior, labels, mask)
    h = ref.compatibility(a_raw, prior, labels, mask)
    ops = ref.clp_operators(ahat, b0, h)
    assert res.valid.any()
    for i, a in enumerate(alphas):
        if not res.valid[i]:
            np.testing.assert_array_equal(np.asarray(res.beliefs[i]), 0.0)
            np.testing.assert_array_equal(np.asarray(res.H_refined[i]), 0.0)
            continue
        b = ref.closed_form(ops, prior, a)  # first pass in numpy
        np.testing.assert_allclose(np.asarray(first.beliefs[i]), b, rtol=1e-6, atol=1e-9)
        b1_prior = b / b.sum(axis=1, keepdims=True)
        h_ref = ref.compatibility(a_raw, b1_prior, labels, mask)  # numpy Sinkhorn of (M*Y)^T A B1
        h_lib = np.asarray(res.H_refined[i])
        np.testing.assert_allclose(h_lib, h_ref, atol=2e-5)
        assert np.max(np.abs(h_lib - np.asarray(res.H))) > 1e-3  # the refinement does change H
        ops_r = ref.clp_operators(ahat, b0, h_lib)
        np.testing.assert_allclose(np.asarray(res.beliefs[i]), ref.closed_form(ops_r, prior, a),
                                   rtol=1e-9, atol=1e-12)
        ops_ref = ref.clp_operators(ahat, b0, h_ref)
        np.testing.assert_allclose(np.asarray(res.beliefs[i]), ref.closed_form(ops_ref, prior, a),
                                   rtol=1e-4, atol=1e-6)
        assert np.max(np.abs(np.asarray(res.beliefs[i]) - b)) > 1e-6  # differs from the first pass (dense: 1e-12)


@pytest.mark.parametrize("normalization", ["sym", "row"])
def test_refined_spectral_scale_matches_numpy(normalization):
    """Both passes on scaled operators: B(alpha) from A^F_k / rho_k, then A^F'_k / rho'_k with H'(alpha)."""
    g = _graph(False)
    prior, labels, mask = _problem(seed=8)
    alphas = (0.5, 0.95)
    res = _run(g, prior, labels, mask, alphas=alphas, normalization=normalization, method="dense",
               compat="refined", spectral_scale=True)
    a_raw = ref.graph_dense(g)
    ahat = ref.normalize(a_raw, normalization)
    b0 = ref.initial_beliefs(prior, labels, mask)
    ops = ref.clp_operators(ahat, b0, ref.compatibility(a_raw, prior, labels, mask))
    ops = ops / ref.spectral_radii(ops)[:, None, None]
    assert res.valid.all()
    for i, a in enumerate(alphas):
        b = ref.closed_form(ops, prior, a)
        h_ref = ref.compatibility(a_raw, b / b.sum(axis=1, keepdims=True), labels, mask)
        np.testing.assert_allclose(np.asarray(res.H_refined[i]), h_ref, atol=2e-5)
        ops_r = ref.clp_operators(ahat, b0, h_ref)
        want = ref.closed_form(ops_r / ref.spectral_radii(ops_r)[:, None, None], prior, a)
        np.testing.assert_allclose(np.asarray(res.beliefs[i]), want, rtol=1e-4, atol=1e-6)
        assert np.max(np.abs(np.asarray(res.beliefs[i]) - b)) > 1e-4  # the refinement moves the beliefs


def test_refined_h_is_estimate_compatibility_on_the_propagated_beliefs():
    """The library path reuses the estimator: same H' as estimate_compatibility on L1rows(B(alpha))."""
    g = _graph(False)
    prior, labels, mask = _problem(seed=9)
    res = _run(g, prior, labels, mask, alphas=(0.6,), compat="refined", method="dense")
    first = _run(g, prior, labels, mask, alphas=(0.6,), method="dense")
    h, info = jaxclp.estimate_compatibility(g, refined_prior(first.beliefs[0]), jnp.asarray(labels),
                                            jnp.asarray(mask))
    np.testing.assert_allclose(np.asarray(res.H_refined[0]), np.asarray(h), rtol=1e-12, atol=1e-14)
    assert bool(info.converged)
    np.testing.assert_allclose(np.asarray(h).sum(0), 1.0, atol=1e-5)
    np.testing.assert_allclose(np.asarray(h).sum(1), 1.0, atol=1e-5)


def test_refined_prior_rows():
    b = jnp.asarray([[0.2, 0.6, 0.0], [-1e-17, 0.5, 0.5], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(np.asarray(refined_prior(b)),
                               [[0.25, 0.75, 0.0], [0.0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]], atol=1e-15)


def test_bad_inputs():
    g = _graph(False)
    prior, labels, mask = _problem()
    with pytest.raises(ValueError, match="compat"):
        _run(g, prior, labels, mask, compat="dce")
    with pytest.raises(ValueError, match="compat='refined'.*l1_normalize"):
        _run(g, prior, labels, mask, compat="refined", l1_normalize=True)
    with pytest.raises(ValueError, match="compat='refined'.*l1_normalize"):
        _run(g, prior, labels, mask, compat="refined", l1_normalize=True, spectral_scale=True)
    with pytest.raises(ValueError, match="alphas"):
        _run(g, prior, labels, mask, compat="refined", alphas=(1.5,))


def test_runner_method_records(tmp_path):
    from jaxclp.experiments import runner
    from jaxclp.experiments.methods import ALPHAS, METHODS, NEEDS_PRIOR

    assert "clp_refined" in METHODS and "clp_refined" in NEEDS_PRIOR
    ds = jaxclp.datasets.synthetic(h=0.2, avg_degree=5, num_classes=3, nodes_per_class=40, seed=0)
    (r,) = runner.run(ds, "medium", ["clp_refined"], runs=1, out=tmp_path, epochs=3, progress=False)
    assert r["method"] == "clp_refined"
    assert r["params"]["compat"] == "refined" and r["params"]["normalization"] == "sym"
    assert r["params"]["prior"] == "mlp" and r["params"]["alpha"] in ALPHAS
    assert r["num_candidates"] == len(ALPHAS)  # sym normalization: every alpha < 1 is valid
    assert 0.0 <= r["test"] <= 1.0 and 0.0 <= r["val"] <= 1.0
