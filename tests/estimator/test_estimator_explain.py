"""``jaxclp.CLP.explain``: the fitted closed form's scores, decomposed exactly."""

import numpy as np
import pytest

import jaxclp
from files import noisy_prior_problem

NODES = [0, 7, 150, 299]


def _data(seed=0, n=300, k=3):
    return noisy_prior_problem(seed, n, k)


@pytest.mark.parametrize("options", [dict(), dict(prior_source="b0", normalization="row"),
                                     dict(spectral_scale=True, alphas=(0.9, 0.99))])
def test_explain_matches_beliefs(options):
    g, y, tm, vm, prior = _data()
    m = jaxclp.CLP(**({"alphas": (0.5, 0.9)} | options)).fit(g, None, y, tm, vm, prior=prior)
    ex = m.explain(NODES, tol=1e-10)
    beliefs = np.asarray(m.beliefs_)[NODES]
    # beliefs_ were solved to the fit's tolerance (1e-6), the explanation to 1e-10
    np.testing.assert_allclose(np.asarray(ex.scores), beliefs, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(np.asarray(ex.contributions).sum(axis=1), np.asarray(ex.scores), rtol=1e-8)
    np.testing.assert_allclose(np.asarray(ex.labelled_term + ex.prior_term), np.asarray(ex.scores), rtol=1e-8)
    assert ex.alpha == m.alpha_ and np.asarray(ex.train_mask).sum() == tm.sum()
    again = m.explain(NODES, tol=1e-10)
    np.testing.assert_array_equal(np.asarray(ex.contributions), np.asarray(again.contributions))


def test_explain_prior_alone_and_refusals():
    g, y, tm, vm, prior = _data()
    exact = np.where(vm[:, None], np.eye(3)[y], np.asarray(prior))  # exact on validation: the prior is kept
    m = jaxclp.CLP(prior=[exact], alphas=(0.5,)).fit(g, None, y, tm, vm)
    assert not m.propagated_
    ex = m.explain([3, 4])
    assert ex.method == "identity" and ex.alpha == 0.0
    np.testing.assert_allclose(np.asarray(ex.scores), exact[[3, 4]])
    with pytest.raises(ValueError, match="not fitted"):
        jaxclp.CLP().explain([0])
    l1 = jaxclp.CLP(l1_normalize=True, alphas=(0.5,)).fit(g, None, y, tm, vm, prior=prior)
    with pytest.raises(ValueError, match="L1-normalized propagation"):
        l1.explain([0])
    with pytest.raises(ValueError, match="nodes must be node indices"):
        jaxclp.CLP(alphas=(0.5,)).fit(g, None, y, tm, vm, prior=prior).explain([300])
