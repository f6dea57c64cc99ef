"""LP, C&S, CLP*, LINK against dense numpy references."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxclp
from jaxclp.baselines import fit_link
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
    out = fit_link(jax.random.key(0), g, jnp.asarray(y), jnp.asarray(tm), jnp.asarray(vm), 2,
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


# ------------------------------------------------------------------ LP / C&S options
def _lp_iter(a, x0, alpha, layers, clamp=None, reset=None):
    """PyG's LabelPropagation loop: x <- post((1-alpha) x0 + alpha A x) from x0."""
    x = x0.copy()
    for _ in range(layers):
        x = (1 - alpha) * x0 + alpha * a @ x
        if clamp is not None:
            x = np.clip(x, *clamp)
        if reset is not None:
            x[reset] = x0[reset]
    return x


def _lp_reset_ref(a, x0, alpha, fixed):
    """Fixed point with the rows ``fixed`` held at x0: (I - a A_UU) x_U = (1-a) x0_U + a A_UL x0_L."""
    u = ~fixed
    x = x0.copy()
    rhs = (1 - alpha) * x0[u] + alpha * a[np.ix_(u, fixed)] @ x0[fixed]
    x[u] = np.linalg.solve(np.eye(u.sum()) - alpha * a[np.ix_(u, u)], rhs)
    return x


def _cs_ref(a, d, y, tm, a1, a2, *, scale="auto", cap=1000.0, clip=True):
    """Closed-form C&S in numpy (autoscale with PyG's cap, or fixed scale with the training rows fixed)."""
    yoh = ref.one_hot(y, d.shape[1])
    e0 = np.where(tm[:, None], yoh - d, 0.0)
    if scale == "auto":
        e = _lp_ref(a, e0, a1)
        sigma = np.abs(e0).sum() / tm.sum()
        size = np.abs(e).sum(1, keepdims=True)
        with np.errstate(divide="ignore"):
            factor = sigma / size
        capped = np.isinf(factor) | (factor > cap)
        factor[capped] = 1.0
        z = d + factor * e
    else:
        capped = None
        z = d + scale * _lp_reset_ref(a, e0, a1, tm)
    if clip:
        z = np.clip(z, 0, 1)
    return _lp_ref(a, np.where(tm[:, None], yoh, z), a2), capped


def _five_nodes():
    # path 0-1-2-3 plus isolated node 4; node 0 is the only training node
    g = jaxclp.Graph.from_edge_index(np.array([[0, 1, 2], [1, 2, 3]]), 5)
    d = np.array([[0.6, 0.4], [0.3, 0.7], [0.5, 0.5], [0.8, 0.2], [0.1, 0.9]])
    y = np.array([0, 1, 0, 1, 1])
    tm = np.array([True, False, False, False, False])
    return g, d, y, tm, ref.normalize(ref.graph_dense(g), "sym")


def test_autoscale_cap_five_nodes():
    g, d, y, tm, a = _five_nodes()
    expected, capped = _cs_ref(a, d, y, tm, 0.1, 0.5)
    # the cap fires on node 3 (3 hops away: scale > 1000) and node 4 (unreachable: infinite scale)
    np.testing.assert_array_equal(capped.ravel(), [False, False, False, True, True])
    args = (g, jnp.asarray(d), jnp.asarray(y), jnp.asarray(tm))
    out = jaxclp.correct_and_smooth(*args, alpha_correct=0.1, alpha_smooth=0.5, method="dense")
    np.testing.assert_allclose(out, expected, atol=1e-12)
    uncapped, _ = _cs_ref(a, d, y, tm, 0.1, 0.5, cap=np.inf)
    assert np.abs(expected - uncapped).max() > 0.05  # the cap matters here
    no_cap = jaxclp.correct_and_smooth(*args, alpha_correct=0.1, alpha_smooth=0.5, method="dense",
                                       autoscale_cap=None)
    np.testing.assert_allclose(no_cap, uncapped, atol=1e-10)


def test_fixed_scale_reference(rng):
    g, y, tm, d, a_raw = _problem(rng)
    a = ref.normalize(a_raw, "sym")
    expected, _ = _cs_ref(a, d, y, tm, 0.8, 0.6, scale=3.0)
    args = (g, jnp.asarray(d), jnp.asarray(y), jnp.asarray(tm))
    for method in ("dense", "bicgstab"):
        out = jaxclp.correct_and_smooth(*args, alpha_correct=0.8, alpha_smooth=0.6, scale=3.0, method=method,
                                        tol=1e-10)
        np.testing.assert_allclose(out, expected, atol=1e-8)
    auto, _ = _cs_ref(a, d, y, tm, 0.8, 0.6)
    assert np.abs(expected - auto).max() > 1e-2
    with pytest.raises(ValueError, match="scale"):
        jaxclp.correct_and_smooth(*args, alpha_correct=0.8, alpha_smooth=0.6, scale=-1.0)
    with pytest.raises(ValueError, match="scale"):
        jaxclp.correct_and_smooth(*args, alpha_correct=0.8, alpha_smooth=0.6, scale="fixed")


@pytest.mark.cpu_bitwise
def test_alpha_one_pyg_layers(rng):
    # PyG's example setting: correction alpha 1 with fixed scale, fixed layer counts and per-step clamps
    g, y, tm, d, a_raw = _problem(rng)
    a = ref.normalize(a_raw, "sym")
    yoh = ref.one_hot(y, 4)
    e0 = np.where(tm[:, None], yoh - d, 0.0)
    e = _lp_iter(a, e0, 1.0, 7, reset=tm)  # fixed scale: training rows reset, no clamp (as PyG)
    z = d + 20.0 * e
    expected = _lp_iter(a, np.where(tm[:, None], yoh, z), 0.8, 9, clamp=(0, 1))
    args = (g, jnp.asarray(d), jnp.asarray(y), jnp.asarray(tm))
    out = jaxclp.correct_and_smooth(*args, alpha_correct=1.0, alpha_smooth=0.8, scale=20.0, correct_layers=7,
                                    smooth_layers=9, clamp=True, clip_corrected=False)
    np.testing.assert_allclose(out, expected, atol=1e-12)
    # autoscale with alpha 1: clamped correction steps, then PyG's scale rule
    e = _lp_iter(a, e0, 1.0, 7, clamp=(-1, 1))
    with np.errstate(divide="ignore"):  # rows with no correction: inf, which PyG's rule maps to 1
        factor = np.abs(e0).sum() / tm.sum() / np.abs(e).sum(1, keepdims=True)
    assert np.isinf(factor).any()  # the case the rule exists for is exercised
    factor[np.isinf(factor) | (factor > 1000)] = 1.0
    expected = _lp_iter(a, np.where(tm[:, None], yoh, d + factor * e), 0.8, 9, clamp=(0, 1))
    out = jaxclp.correct_and_smooth(*args, alpha_correct=1.0, alpha_smooth=0.8, correct_layers=7,
                                    smooth_layers=9, clamp=True, clip_corrected=False)
    np.testing.assert_allclose(out, expected, atol=1e-12)
    # alpha_correct = 1 without a layer count runs the stated ALPHA_ONE_LAYERS = 50 steps
    default = jaxclp.correct_and_smooth(*args, alpha_correct=1.0, alpha_smooth=0.8, scale=2.0)
    fifty = jaxclp.correct_and_smooth(*args, alpha_correct=1.0, alpha_smooth=0.8, scale=2.0, correct_layers=50)
    np.testing.assert_array_equal(default, fifty)
    assert jaxclp.baselines.ALPHA_ONE_LAYERS == 50
    with pytest.raises(ValueError, match="alpha"):
        jaxclp.label_propagation(g, jnp.asarray(y), jnp.asarray(tm), 4, alpha=1.0)
    with pytest.raises(ValueError, match="num_layers"):
        jaxclp.label_propagation(g, jnp.asarray(y), jnp.asarray(tm), 4, alpha=0.5, num_layers=0)


def _star_problem():
    # hub 0 with 9 training leaves of class 0: sym-normalized row sum of the hub is 3, so clamps fire
    s = np.r_[np.zeros(9, int), 5, 6]
    r = np.r_[np.arange(1, 10), 10, 11]
    g = jaxclp.Graph.from_edge_index(np.stack([s, r]), 12)
    y = np.r_[1, np.zeros(9, int), 1, 0]
    tm = np.r_[False, np.ones(9, bool), False, False]
    return g, y, tm, ref.normalize(ref.graph_dense(g), "sym")


def test_label_propagation_clamp():
    g, y, tm, a = _star_problem()
    y0 = ref.one_hot(y, 2) * tm[:, None]
    args = (g, jnp.asarray(y), jnp.asarray(tm), 2)
    out = jaxclp.label_propagation(*args, alpha=0.9, num_layers=6, clamp=(0.0, 1.0))
    np.testing.assert_allclose(out, _lp_iter(a, y0, 0.9, 6, clamp=(0, 1)), atol=1e-13)
    # converged (tol) clamped iteration equals the long numpy loop; unclamped differs
    conv = jaxclp.label_propagation(*args, alpha=jnp.array([0.5, 0.9]), clamp=(0.0, 1.0), tol=1e-13)
    for i, al in enumerate([0.5, 0.9]):
        np.testing.assert_allclose(conv[i], _lp_iter(a, y0, al, 2000, clamp=(0, 1)), atol=1e-11)
    free = jaxclp.label_propagation(*args, alpha=0.9, method="dense")
    assert np.asarray(free).max() > 1.2 and np.asarray(conv[1]).max() <= 1.0
    with pytest.raises(ValueError, match="clamp"):
        jaxclp.label_propagation(*args, alpha=0.9, clamp=(1.0, 0.0))


def test_label_propagation_reset_training_rows(rng):
    g, y, tm, _, a_raw = _problem(rng)
    a = ref.normalize(a_raw, "sym")
    y0 = ref.one_hot(y, 4) * tm[:, None]
    args = (g, jnp.asarray(y), jnp.asarray(tm), 4)
    alphas = np.array([0.5, 0.95])
    for method in ("dense", "auto", "bicgstab"):
        out = jaxclp.label_propagation(*args, alpha=jnp.asarray(alphas), reset_train=True, method=method,
                                       tol=1e-11)
        for i, al in enumerate(alphas):
            np.testing.assert_allclose(out[i], _lp_reset_ref(a, y0, al, tm), atol=1e-9)
            np.testing.assert_array_equal(np.asarray(out[i])[tm], y0[tm])  # labels kept exactly
    layers = jaxclp.label_propagation(*args, alpha=0.7, reset_train=True, num_layers=5)
    np.testing.assert_allclose(layers, _lp_iter(a, y0, 0.7, 5, reset=tm), atol=1e-13)
    plain = jaxclp.label_propagation(*args, alpha=0.95, method="dense")
    assert np.abs(np.asarray(plain)[tm] - y0[tm]).max() > 0.1  # without reset the training rows move


def test_edge_weights_honoured(rng):
    n, k = 50, 3
    ei = ref.random_edge_index(rng, n, 3 * n)
    w = rng.uniform(0.1, 5.0, ei.shape[1])
    g = jaxclp.Graph.from_edge_index(ei, n, weights=w)
    g1 = jaxclp.Graph.from_edge_index(ei, n)
    y = rng.integers(0, k, n)
    tm = rng.random(n) < 0.4
    d = rng.dirichlet(np.ones(k), n)
    a_w = ref.graph_dense(g)
    assert len(np.unique(a_w[a_w > 0])) > 10  # really weighted
    for norm in ("sym", "row"):
        out = jaxclp.label_propagation(g, jnp.asarray(y), jnp.asarray(tm), k, alpha=0.8, normalization=norm,
                                       method="dense")
        exp = _lp_ref(ref.normalize(a_w, norm), ref.one_hot(y, k) * tm[:, None], 0.8)
        np.testing.assert_allclose(out, exp, atol=1e-12)
        unweighted = jaxclp.label_propagation(g1, jnp.asarray(y), jnp.asarray(tm), k, alpha=0.8,
                                              normalization=norm, method="dense")
        assert np.abs(np.asarray(unweighted) - exp).max() > 1e-2
    out = jaxclp.correct_and_smooth(g, jnp.asarray(d), jnp.asarray(y), jnp.asarray(tm), alpha_correct=0.5,
                                    alpha_smooth=0.7, method="dense")
    expected, _ = _cs_ref(ref.normalize(a_w, "sym"), d, y, tm, 0.5, 0.7)
    np.testing.assert_allclose(out, expected, atol=1e-12)


def _far_nodes_problem(rng, n=400, k=4):
    # a random core of 340 nodes plus 6 paths of 10 nodes hanging off it: nodes up to 10 hops from any
    # training node, whose propagated residual at alpha 0.1 is ~0.05^10 (autoscale would blow it up)
    core = 340
    ei = ref.random_edge_index(rng, core, 4 * core)
    tails = []
    for t in range(6):
        nodes = core + 10 * t + np.arange(10)
        tails.append(np.stack([np.r_[rng.integers(0, core), nodes[:-1]], nodes]))
    g = jaxclp.Graph.from_edge_index(np.concatenate([ei, *tails], axis=1), n)
    labels = rng.integers(0, k, n)
    train = np.zeros(n, bool)
    train[rng.choice(core, 60, replace=False)] = True
    return g, labels, train, rng.dirichlet(np.ones(k), n)


@pytest.mark.parametrize("alpha_correct", [0.1, 0.5, 0.9])
def test_correct_and_smooth_solver_independent(rng, alpha_correct):
    g, y, tm, d = _far_nodes_problem(rng)
    args = (g, jnp.asarray(d), jnp.asarray(y), jnp.asarray(tm))
    tol = 1e-6
    dense = jaxclp.correct_and_smooth(*args, alpha_correct=alpha_correct, alpha_smooth=0.5, method="dense")
    default = jaxclp.correct_and_smooth(*args, alpha_correct=alpha_correct, alpha_smooth=0.5, tol=tol)
    assert np.abs(np.asarray(default) - np.asarray(dense)).max() <= 10 * tol
    expected, capped = _cs_ref(ref.normalize(ref.graph_dense(g), "sym"), d, y, tm, alpha_correct, 0.5)
    np.testing.assert_allclose(dense, expected, atol=1e-10)
    if alpha_correct == 0.1:
        assert capped.sum() >= 6  # the regime of the issue: the cap fires on the tails
