"""LP, C&S, CLP*, LINK against dense numpy references."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxclp
import reference as ref


def _problem(rng, n=60, k=4):
    ei = ref.random_edge_index(rng, n, 3 * n, isolated=3)
    g = jaxclp.Graph.from_edge_index(ei, n)
    labels = rng.integers(0, k, n)
    train = rng.random(n) < 0.3
    train[0] = True
    prior = rng.dirichlet(np.ones(k), n)
    return g, labels, train, prior, ref.graph_dense(g)


def _lp_ref(a_sym, x0, alpha):
    n = a_sym.shape[0]
    return (1 - alpha) * np.linalg.solve(np.eye(n) - alpha * a_sym, x0)


@pytest.mark.parametrize("normalization", ["sym", "row"])
def test_label_propagation_closed_form(rng, normalization):
    g, y, tm, _, a = _problem(rng)
    k = 4
    y0 = ref.one_hot(y, k) * tm[:, None]
    alphas = np.array([0.2, 0.9])
    out = jaxclp.label_propagation(g, jnp.asarray(y), jnp.asarray(tm), k, alpha=jnp.asarray(alphas),
                                   normalization=normalization)
    for i, al in enumerate(alphas):
        np.testing.assert_allclose(out[i], _lp_ref(ref.normalize(a, normalization), y0, al), atol=1e-6)  # solver tol 1e-6


def test_label_propagation_ignores_non_training_labels(rng):
    g, y, tm, _, _ = _problem(rng)
    y2 = np.where(tm, y, (y + 1) % 4)
    a = jaxclp.label_propagation(g, jnp.asarray(y), jnp.asarray(tm), 4, alpha=0.5)
    b = jaxclp.label_propagation(g, jnp.asarray(y2), jnp.asarray(tm), 4, alpha=0.5)
    np.testing.assert_array_equal(a, b)


def test_correct_and_smooth_reference(rng):
    g, y, tm, d, a = _problem(rng)
    s = ref.normalize(a, "sym")
    yoh = ref.one_hot(y, 4)
    e0 = np.where(tm[:, None], yoh - d, 0.0)
    e = _lp_ref(s, e0, 0.6)
    sigma = np.abs(e0).sum() / tm.sum()
    size = np.abs(e).sum(1, keepdims=True)
    scale = np.where(size > 0, sigma / np.where(size > 0, size, 1), 0)
    z = np.clip(d + scale * e, 0, 1)
    expected = _lp_ref(s, np.where(tm[:, None], yoh, z), 0.3)
    out = jaxclp.correct_and_smooth(g, jnp.asarray(d), jnp.asarray(y), jnp.asarray(tm), alpha_correct=0.6,
                                    alpha_smooth=0.3, method="dense")
    # exact solves: autoscale divides by |E_i|, which amplifies an iterative solver's 1e-6 residual
    np.testing.assert_allclose(out, expected, atol=1e-10)


def test_clp_star_iteration_reference(rng):
    g, y, tm, d, a = _problem(rng)
    s = ref.normalize(a, "sym")
    b0 = ref.initial_beliefs(d, y, tm)
    h = rng.dirichlet(np.ones(4), 4)
    b = b0.copy()
    for _ in range(7):
        b = 0.3 * d + 0.7 * s @ b @ h
    out = jaxclp.clp_star(g, jnp.asarray(d), jnp.asarray(b0), jnp.asarray(h), alpha=0.7, num_iters=7)
    np.testing.assert_allclose(out, b, atol=1e-10)
    both = jaxclp.clp_star(g, jnp.asarray(d), jnp.asarray(b0), jnp.asarray(h), alpha=jnp.array([0.7, 0.1]),
                           num_iters=7)
    np.testing.assert_allclose(both[0], b, atol=1e-10)


def test_link_learns_adjacency_rows():
    # Two classes; class-0 nodes all link to hub 0, class-1 nodes to hub 1: adjacency rows are separable.
    n = 80
    y = np.r_[0, 1, np.arange(n - 2) % 2]
    ei = np.array([[i, y[i]] for i in range(2, n)]).T
    g = jaxclp.Graph.from_edge_index(ei, n)
    rng = np.random.default_rng(0)
    tm = rng.random(n) < 0.5
    vm = ~tm
    out = jaxclp.fit_link(jax.random.key(0), g, jnp.asarray(y), jnp.asarray(tm), jnp.asarray(vm), 2,
                          cfg=jaxclp.TrainConfig(epochs=200, patience=0))
    pred = np.asarray(out).argmax(1)
    assert (pred[2:] == y[2:]).mean() == 1.0
    np.testing.assert_allclose(np.asarray(out).sum(1), 1.0, atol=1e-6)


def test_bad_alpha_raises(rng):
    g, y, tm, d, _ = _problem(rng)
    with pytest.raises(ValueError, match="alpha"):
        jaxclp.label_propagation(g, jnp.asarray(y), jnp.asarray(tm), 4, alpha=1.0)
    with pytest.raises(ValueError, match="train_mask"):
        jaxclp.label_propagation(g, jnp.asarray(y), jnp.zeros(60, bool), 4, alpha=0.5)


def test_correct_and_smooth_vector_alpha_equals_scalar(rng):
    g, y, tm, d, _ = _problem(rng)
    args = (g, jnp.asarray(d), jnp.asarray(y), jnp.asarray(tm))
    both = jaxclp.correct_and_smooth(*args, alpha_correct=0.5, alpha_smooth=jnp.array([0.2, 0.8]), method="dense")
    for i, a2 in enumerate([0.2, 0.8]):
        one = jaxclp.correct_and_smooth(*args, alpha_correct=0.5, alpha_smooth=a2, method="dense")
        np.testing.assert_allclose(both[i], one, atol=1e-12)
