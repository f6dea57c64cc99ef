"""``jaxclp.CLP.update``: new labels, the fitted prior, alpha and solver kept, a warm-started solve that equals the
cold one and a dense numpy reference."""

import jax.numpy as jnp
import numpy as np
import pytest

import jaxclp
import reference as ref
from files import noisy_prior_problem

N, K = 240, 3


def _data(seed=0):
    return noisy_prior_problem(seed, N, K)


def _dense(m, graph, labels_idx, mask, h):
    """The closed form of the fitted variant from numpy, B0 and F built from ``mask``."""
    prior = np.asarray(m.prior_)
    b0 = ref.initial_beliefs(prior, labels_idx, mask)
    ops = ref.clp_operators(ref.normalize(ref.graph_dense(graph), m.normalization_), b0, np.asarray(h))
    if m.spectral_scale_:
        ops = ops / ref.spectral_radii(ops)[:, None, None]
    return ref.closed_form(ops, prior if m.prior_source_ == "mlp" else b0, m.alpha_)


@pytest.mark.parametrize("options", [dict(), dict(prior_source="b0", normalization="row"),
                                     dict(spectral_scale=True, alphas=(0.9, 0.99)), dict(method="cg"),
                                     dict(method="bicgstab", alphas=(0.9,))])
def test_update_equals_cold_and_dense(options):
    g, y, tm, vm, prior = _data()
    m = jaxclp.CLP(**({"alphas": (0.5, 0.9)} | options)).fit(g, None, y, tm, vm, prior=prior)
    h_fit, method = np.asarray(m.H_), m.method_
    rng = np.random.default_rng(1)
    new = tm.copy()
    new[rng.choice(np.flatnonzero(~tm & ~vm), 12, replace=False)] = True  # 12 labels arrive (5 % of the nodes)
    given = np.where(new, y, -1)
    res = m.update(given, cold=True, tol=1e-10)
    assert res.method == method and res.alpha == m.alpha_ and res is m.update_
    np.testing.assert_array_equal(np.asarray(m.H_), h_fit)  # H kept
    np.testing.assert_array_equal(m.train_mask_, new)
    dense = _dense(m, g, y, new, h_fit)
    atol = 1e-6 if options.get("spectral_scale") else 1e-9  # the power iteration's rho
    np.testing.assert_allclose(np.asarray(m.beliefs_), dense, atol=atol)
    np.testing.assert_allclose(np.asarray(res.beliefs), np.asarray(res.cold.value), atol=1e-9)
    warm, cold = res.iterations
    if method in ("cg", "bicgstab"):
        assert warm.sum() < cold.sum(), (warm, cold)
    np.testing.assert_array_equal(m.predict(), m.classes_[np.argmax(dense, axis=1)])
    # explain follows the update: the new labelled nodes' terms are in labelled_term, complete to the tolerance
    ex = m.explain([0, 5], tol=1e-10)
    np.testing.assert_array_equal(np.asarray(ex.train_mask), new)
    np.testing.assert_allclose(np.asarray(ex.labelled_term + ex.prior_term), dense[[0, 5]], atol=atol)


def test_update_reestimates_h_and_maps_label_values():
    g, y, tm, vm, prior = _data(1)
    values = np.array([10, 20, 30])  # the user's label values
    m = jaxclp.CLP(alphas=(0.9,)).fit(g, None, values[y], tm, vm, prior=prior)
    given = np.where(tm | vm, values[y], -1)  # the validation labels join the training set (train_mask None)
    res = m.update(given, reestimate_compatibility=True, tol=1e-10)
    mask = tm | vm
    h_new, _ = jaxclp.estimate_compatibility(g, m.prior_, jnp.asarray(np.where(mask, y, 0)), jnp.asarray(mask))
    np.testing.assert_allclose(np.asarray(m.H_), np.asarray(h_new), atol=1e-12)
    assert res.sinkhorn is not None and m.sinkhorn_ is res.sinkhorn
    np.testing.assert_allclose(np.asarray(m.beliefs_), _dense(m, g, y, mask, h_new), atol=1e-9)
    # an explicit train_mask reads only its nodes' labels; a corrected label moves B0 where it changed
    corrected = given.copy()
    j = int(np.flatnonzero(tm)[0])
    corrected[j] = values[(y[j] + 1) % K]
    m.update(corrected, tm, tol=1e-10)
    y2 = y.copy()
    y2[j] = (y[j] + 1) % K
    np.testing.assert_allclose(np.asarray(m.beliefs_), _dense(m, g, y2, tm, m.H_), atol=1e-9)


def test_update_refusals_and_prior_alone():
    g, y, tm, vm, prior = _data()
    with pytest.raises(ValueError, match="not fitted"):
        jaxclp.CLP().update(y)
    m = jaxclp.CLP(alphas=(0.5,)).fit(g, None, y, tm, vm, prior=prior)
    with pytest.raises(ValueError, match="labels must be one of classes_"):
        m.update(np.where(tm, 7, -1))
    with pytest.raises(ValueError, match="labels is -1 .* train_mask"):
        m.update(np.full(N, -1), tm)
    with pytest.raises(ValueError, match="no labelled node"):
        m.update(np.full(N, -1))
    with pytest.raises(ValueError, match="labels must have shape|labels"):
        m.update(y[:10])
    l1 = jaxclp.CLP(l1_normalize=True, alphas=(0.5,)).fit(g, None, y, tm, vm, prior=prior)
    with pytest.raises(ValueError, match="L1-normalized"):
        l1.update(y)
    exact = np.where(vm[:, None], np.eye(K)[y], np.asarray(prior))  # exact on validation: the prior is kept
    alone = jaxclp.CLP(prior=[exact], alphas=(0.5,)).fit(g, None, y, tm, vm)
    assert not alone.propagated_
    res = alone.update(y)
    assert res.method == "identity" and res.warm is None
    np.testing.assert_array_equal(np.asarray(alone.beliefs_), exact)
