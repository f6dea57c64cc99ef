"""Iterative CLP propagation vs the reference loop and the reference closed form."""

import functools
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import reference as ref
from jaxclp import Graph, propagate

NORMS = ("sym", "row", "none")


KIND_MAP = {"undirected": "undirected", "directed": "directed", "self_loops_added": "undirected_loops"}


@functools.lru_cache(maxsize=None)
def make_graph(kind, n=40):
    """One graph per kind for the module, all with the same n and edge count (kernels compile once)."""
    ei, kw = ref.graph_spec(KIND_MAP[kind], seed=22, n=n)
    return Graph.from_edge_index(ei, n, **kw)


def make_problem(rng, n, k):
    prior, labels, mask = ref.random_problem(rng, n, k)
    b0 = ref.initial_beliefs(prior, labels, mask)
    h = ref.sinkhorn(rng.random((k, k)) + 0.5 * np.eye(k))
    return b0, h, prior


def ref_ops(g, b0, h, norm):
    return ref.clp_operators(ref.normalize(ref.graph_dense(g), norm), b0, h)


def pick_alpha(ops, norm):
    if norm == "none":  # raw adjacency: stay well inside the convergence region
        return min(0.9, 0.5 / max(ref.spectral_radii(ops).max(), 1e-3))
    return 0.8  # rho(A^F_k) <= rho(Ahat) <= 1 for "sym"/"row"


@pytest.mark.parametrize("k", [2, 5, 17])
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("kind", ["undirected", "directed", "self_loops_added"])
def test_many_steps_reach_closed_form(rng, kind, norm, k):
    n = 40
    g = make_graph(kind, n)
    b0, h, prior = make_problem(rng, n, k)
    ops = ref_ops(g, b0, h, norm)
    alpha = pick_alpha(ops, norm)
    b, info = propagate(g, jnp.asarray(b0), jnp.asarray(h), jnp.asarray(prior), alpha=alpha, num_iters=200,
                        normalization=norm, return_info=True)
    b = np.asarray(b)
    assert b.shape == (n, k) and b.dtype == np.float64
    expect = ref.closed_form(ops, prior, alpha)
    np.testing.assert_allclose(b, expect, rtol=1e-6, atol=1e-7 * np.abs(expect).max())
    res, rel = ref.residual(ops, prior, b, alpha)
    # PropagateInfo.residual is the residual of the returned B
    np.testing.assert_allclose(np.asarray(info.residual), res, atol=1e-6 * np.linalg.norm(prior, axis=0).max())
    assert np.all(np.asarray(info.relative_residual) < 1e-5)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("num_iters", [0, 1, 7])
def test_few_steps_equal_reference_loop(rng, norm, num_iters):
    n, k = 40, 5
    g = make_graph("directed", n)
    b0, h, prior = make_problem(rng, n, k)
    ops = ref_ops(g, b0, h, norm)
    alpha = pick_alpha(ops, norm)
    b = np.asarray(propagate(g, jnp.asarray(b0), jnp.asarray(h), jnp.asarray(prior), alpha=alpha,
                             num_iters=num_iters, normalization=norm))
    expect = ref.iterate(ops, prior, b0, alpha, num_iters)
    np.testing.assert_allclose(b, expect, rtol=1e-6, atol=1e-9)
    if num_iters == 0:
        np.testing.assert_array_equal(b, b0)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("kind", ["undirected", "directed"])
def test_l1_normalize_vs_reference_loop(rng, kind, norm):
    n, k = 40, 5
    g = make_graph(kind, n)
    b0, h, prior = make_problem(rng, n, k)
    ops = ref_ops(g, b0, h, norm)
    alpha = 0.9  # the L1 variant never diverges, even for the raw adjacency
    for num_iters in (3, 30):
        b = np.asarray(propagate(g, jnp.asarray(b0), jnp.asarray(h), jnp.asarray(prior), alpha=alpha,
                                 num_iters=num_iters, normalization=norm, l1_normalize=True))
        expect = ref.iterate(ops, prior, b0, alpha, num_iters, l1_normalize=True)
        np.testing.assert_allclose(b, expect, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(b.sum(axis=1), 1.0, atol=1e-12)


@pytest.mark.parametrize("l1", [False, True])
@pytest.mark.parametrize("norm", NORMS)
def test_edgewise_engine_equals_factored(rng, norm, l1):
    n, k = 40, 5
    g = make_graph("directed", n)
    b0, h, prior = make_problem(rng, n, k)
    alpha = pick_alpha(ref_ops(g, b0, h, norm), norm)
    args = (g, jnp.asarray(b0), jnp.asarray(h), jnp.asarray(prior))
    kw = dict(alpha=alpha, num_iters=25, normalization=norm, l1_normalize=l1)
    a = np.asarray(propagate(*args, engine="factored", **kw))
    b = np.asarray(propagate(*args, engine="edgewise", **kw))
    np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------------------------------ divergence
def star_problem(n_leaves=20):
    """Undirected star, raw adjacency. Leaves: training nodes of class 2 (one-hot); centre: prior
    ~ one-hot class 2. Only class 2 has a nonzero spectral radius, sqrt(20 * 0.9*0.8 * 0.73) ~ 3.24."""
    n, k = n_leaves + 1, 3
    g = Graph.from_edge_index(np.stack([np.zeros(n_leaves, int), np.arange(1, n)]), n)
    prior = np.full((n, k), 1.0 / k)
    prior[0] = [0.05, 0.05, 0.9]
    labels = np.full(n, 2, np.int32)
    mask = np.ones(n, bool)
    mask[0] = False
    b0 = ref.initial_beliefs(prior, labels, mask)
    h = np.full((k, k), 0.1) + 0.7 * np.eye(k)
    return g, b0, h, prior


def test_divergent_configuration_raises_with_numbers():
    g, b0, h, prior = star_problem()
    ops = ref_ops(g, b0, h, "none")
    rho = ref.spectral_radii(ops)
    np.testing.assert_allclose(rho[:2], 0.0, atol=1e-6)
    np.testing.assert_allclose(rho[2], np.sqrt(20 * 0.9 * 0.8 * 0.73), rtol=1e-12)
    alpha = 0.9
    assert alpha * rho[2] > 1
    with pytest.raises(ValueError) as exc:
        propagate(g, jnp.asarray(b0), jnp.asarray(h), jnp.asarray(prior), alpha=alpha, normalization="none")
    msg = str(exc.value)
    assert re.search(r"\bclass 2\b", msg), msg
    m_rho = re.search(r"rho = ([0-9.eE+-]+)", msg)
    m_inv = re.search(r"1/rho = ([0-9.eE+-]+)", msg)
    assert m_rho and m_inv, msg
    np.testing.assert_allclose(float(m_rho.group(1)), rho[2], rtol=1e-3)
    np.testing.assert_allclose(float(m_inv.group(1)), 1.0 / rho[2], rtol=1e-3)


def test_divergent_configuration_warns_without_throw():
    g, b0, h, prior = star_problem()
    ops = ref_ops(g, b0, h, "none")
    alpha, iters = 0.9, 30
    with pytest.warns(RuntimeWarning, match=r"class 2"):
        b, info = propagate(g, jnp.asarray(b0), jnp.asarray(h), jnp.asarray(prior), alpha=alpha,
                            num_iters=iters, normalization="none", throw=False, return_info=True)
    expect = ref.iterate(ops, prior, b0, alpha, iters)
    assert np.abs(expect).max() > 1e6  # really diverging
    np.testing.assert_allclose(np.asarray(b), expect, rtol=1e-6)
    assert info.spectral is not None
    # classes 0 and 1 are nilpotent (rho = 0): the power iteration only approaches 0 like 1/t and
    # reports converged=False there; class 2 is estimated accurately
    rho = ref.spectral_radii(ops)
    np.testing.assert_allclose(np.asarray(info.spectral.rho), rho, rtol=1e-3, atol=2e-3)
    assert bool(np.asarray(info.spectral.converged)[2])
    assert np.all(np.asarray(info.spectral.upper) >= rho - 1e-9)


def test_just_below_one_over_rho_is_accepted():
    g, b0, h, prior = star_problem()
    ops = ref_ops(g, b0, h, "none")
    rho = ref.spectral_radii(ops).max()
    alpha = 0.8 / rho  # row/column-sum bounds (~14) cannot prove this; the power iteration must
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b = propagate(g, jnp.asarray(b0), jnp.asarray(h), jnp.asarray(prior), alpha=alpha, num_iters=400,
                      normalization="none")
    np.testing.assert_allclose(np.asarray(b), ref.closed_form(ops, prior, alpha), rtol=1e-6, atol=1e-9)
    # the L1-normalized variant is never rejected
    propagate(g, jnp.asarray(b0), jnp.asarray(h), jnp.asarray(prior), alpha=0.99, normalization="none",
              l1_normalize=True)


# ------------------------------------------------------------------------------------ validation
@pytest.mark.parametrize("bad", ["alpha0", "alpha1", "alpha_neg", "alpha_big", "alpha_nan", "prior_rows",
                                 "prior_cols", "b0_rows", "h_shape", "prior_nan", "b0_nan", "b0_negative",
                                 "h_nan", "normalization", "engine", "num_iters"])
def test_rejects_bad_input(rng, bad):
    n, k = 40, 5
    g = make_graph("undirected", n)
    b0, h, prior = make_problem(rng, n, k)
    kw = dict(alpha=0.5, num_iters=5)
    if bad.startswith("alpha"):
        kw["alpha"] = {"alpha0": 0.0, "alpha1": 1.0, "alpha_neg": -0.2, "alpha_big": 1.5,
                       "alpha_nan": float("nan")}[bad]
    elif bad == "prior_rows":
        prior = prior[:-1]
    elif bad == "prior_cols":
        prior = prior[:, :-1]
    elif bad == "b0_rows":
        b0 = np.vstack([b0, b0[:1]])
    elif bad == "h_shape":
        h = np.eye(k + 1)
    elif bad == "prior_nan":
        prior[4, 2] = np.nan
    elif bad == "b0_nan":
        b0[4, 2] = np.nan
    elif bad == "b0_negative":
        b0[4, 2] = -0.5
    elif bad == "h_nan":
        h[0, 0] = np.nan
    elif bad == "normalization":
        kw["normalization"] = "rw"
    elif bad == "engine":
        kw["engine"] = "dense"
    elif bad == "num_iters":
        kw["num_iters"] = -1
    with pytest.raises(ValueError):
        propagate(g, jnp.asarray(b0), jnp.asarray(h), jnp.asarray(prior), **kw)


# ------------------------------------------------------------------------------------ compilation
def test_second_call_same_shapes_does_not_recompile(rng, compile_counter):
    n, k = 40, 5
    g = make_graph("undirected", n)
    p1 = tuple(map(jnp.asarray, make_problem(rng, n, k)))
    p2 = tuple(map(jnp.asarray, make_problem(rng, n, k)))
    kw = dict(alpha=0.7, num_iters=20)
    jax.block_until_ready(propagate(g, *p1, **kw))
    with compile_counter() as cc:
        jax.block_until_ready(propagate(g, *p2, **kw))
        jax.block_until_ready(propagate(g, *p2, alpha=0.6, num_iters=33))  # alpha, num_iters are traced
    assert cc.count == 0, f"{cc.count} recompilation(s)"


def test_user_jit_no_recompile_and_matches_eager(rng, compile_counter):
    n, k = 40, 5
    g = make_graph("directed", n)
    p1 = tuple(map(jnp.asarray, make_problem(rng, n, k)))
    p2 = tuple(map(jnp.asarray, make_problem(rng, n, k)))
    p3 = tuple(map(jnp.asarray, make_problem(rng, n, 4)))  # another K: must compile again
    f = jax.jit(lambda gr, b0, h, pr, a: propagate(gr, b0, h, pr, alpha=a, num_iters=15))
    a1, a2 = jnp.asarray(0.5), jnp.asarray(0.6)
    out1 = jax.block_until_ready(f(g, *p1, a1))
    assert f._cache_size() == 1
    with compile_counter() as cc:
        out2 = jax.block_until_ready(f(g, *p2, a2))
    assert cc.count == 0 and f._cache_size() == 1
    with compile_counter() as cc:
        jax.block_until_ready(f(g, *p3, a1))
    assert cc.count > 0 and f._cache_size() == 2  # the counters do detect a recompilation
    np.testing.assert_allclose(np.asarray(out1), np.asarray(propagate(g, *p1, alpha=0.5, num_iters=15)),
                               rtol=1e-12)
    ops = ref_ops(g, *map(np.asarray, p2[:2]), "sym")
    np.testing.assert_allclose(np.asarray(out2), ref.iterate(ops, np.asarray(p2[2]), np.asarray(p2[0]), 0.6, 15),
                               rtol=1e-6, atol=1e-9)
