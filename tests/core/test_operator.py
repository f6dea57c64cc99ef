"""The factored CLP operator and its spectral radius vs dense numpy matrices."""

import contextlib
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import reference as ref
from jaxclp import Graph, clp_operator, edge_weights, spectral_radius
from jaxclp.graph import edge_values
from jaxclp.operator import FactoredOperator, lp_operator

NORMS = ("sym", "row", "none")
RTOL = 1e-6  # semantic errors are O(1); independent of how Ahat's float rounding is done


KIND_MAP = {"undirected": "undirected", "directed_loops_dups": "directed",
            "connected_undirected": "connected_undirected", "connected_directed": "connected_directed"}
N = 40


@functools.lru_cache(maxsize=None)
def make_graph(kind, n=N):
    """One graph per kind for the module, all with the same n and number of edges: the eager ops and
    jitted kernels compile once (the tests vary K, the normalization, B0 and H)."""
    ei, kw = ref.graph_spec(KIND_MAP[kind], seed=11, n=n)
    return Graph.from_edge_index(ei, n, **kw)


def make_case(rng, kind, n, k, train_frac=0.3):
    g = make_graph(kind)
    prior, labels, mask = ref.random_problem(rng, n, k, train_frac=train_frac)
    b0 = ref.initial_beliefs(prior, labels, mask)
    h = ref.sinkhorn(rng.random((k, k)) + 0.05 * np.eye(k))
    return g, b0, h, prior


def ref_ops(g, b0, h, norm):
    return ref.clp_operators(ref.normalize(ref.graph_dense(g), norm), b0, h)


@pytest.mark.parametrize("k", [2, 5, 17])
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("kind", ["undirected", "directed_loops_dups"])
def test_factored_operator_vs_dense_reference(rng, kind, norm, k):
    n = N
    g, b0, h, _ = make_case(rng, kind, n, k)
    op = clp_operator(g, jnp.asarray(b0), jnp.asarray(h), normalization=norm)
    ops = ref_ops(g, b0, h, norm)  # (K, n, n)
    scale = max(1.0, np.abs(ops).max())
    dense = np.asarray(op.to_dense())
    assert dense.shape == (k, n, n)
    np.testing.assert_allclose(dense, ops, rtol=RTOL, atol=1e-9 * scale)
    x = rng.normal(size=(n, k))
    mv = np.asarray(op.matvec(jnp.asarray(x)))
    rmv = np.asarray(op.rmatvec(jnp.asarray(x)))
    np.testing.assert_allclose(mv, np.einsum("kij,jk->ik", ops, x), rtol=RTOL, atol=1e-6 * scale)
    np.testing.assert_allclose(rmv, np.einsum("kji,jk->ik", ops, x), rtol=RTOL, atol=1e-6 * scale)
    diag = np.asarray(op.diagonal())
    np.testing.assert_allclose(diag, np.stack([np.diag(o) for o in ops], axis=1), rtol=RTOL, atol=1e-12)
    if kind == "directed_loops_dups":
        assert np.any(diag > 0), "self-loops must show on the diagonal"
    else:
        assert np.all(diag == 0)
    # per-edge values: Ahat_e * b0[r, k] * G[s, k] (a repeated edge keeps its own value)
    s, r, w = np.asarray(g.senders), np.asarray(g.receivers), np.asarray(g.weights, np.float64)
    vals = ref.edge_normalized_values(s, r, w, n, norm)
    em = np.asarray(op.edge_matrix())
    g_mat = b0 @ h
    np.testing.assert_allclose(em, vals[:, None] * b0[r] * g_mat[s], rtol=RTOL, atol=1e-12)
    # consistency with the materialized CLP edge weights F: A^F_k[e] = Ahat_e * F[e, k]
    f = np.asarray(edge_weights(g, jnp.asarray(b0), jnp.asarray(h)))
    np.testing.assert_allclose(em, np.asarray(edge_values(g, norm))[:, None] * f, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("k", [2, 5])
def test_classwise_loop_and_vmap_equal_all_classes(rng, k):
    n = N
    g, b0, h, _ = make_case(rng, "directed_loops_dups", n, k)
    op = clp_operator(g, jnp.asarray(b0), jnp.asarray(h), normalization="sym")
    x = jnp.asarray(rng.normal(size=(n, k)))
    full = np.asarray(op.matvec(x))
    full_t = np.asarray(op.rmatvec(x))
    looped = np.stack([np.asarray(op._replace(left=op.left[:, c:c + 1], right=op.right[:, c:c + 1])
                                  .matvec(x[:, c:c + 1]))[:, 0] for c in range(k)], axis=1)
    np.testing.assert_allclose(looped, full, rtol=1e-13, atol=1e-15)

    def one(left, right, v, transpose=False):
        sub = op._replace(left=left[:, None], right=right[:, None])
        return (sub.rmatvec if transpose else sub.matvec)(v[:, None])[:, 0]

    vm = jax.vmap(one, in_axes=(1, 1, 1), out_axes=1)(op.left, op.right, x)
    vm_t = jax.vmap(lambda a, b, v: one(a, b, v, True), in_axes=(1, 1, 1), out_axes=1)(op.left, op.right, x)
    np.testing.assert_allclose(np.asarray(vm), full, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(np.asarray(vm_t), full_t, rtol=1e-13, atol=1e-15)


def test_operator_right_is_b0_times_h(rng):
    g, b0, h, _ = make_case(rng, "undirected", N, 5)
    op = clp_operator(g, jnp.asarray(b0), jnp.asarray(h))
    assert isinstance(op, FactoredOperator)
    np.testing.assert_allclose(np.asarray(op.left), b0, rtol=0)
    np.testing.assert_allclose(np.asarray(op.right), b0 @ h, rtol=1e-14)


def test_operator_shape_validation(rng):
    g, b0, h, _ = make_case(rng, "undirected", N, 5)
    with pytest.raises(ValueError):
        clp_operator(g, jnp.asarray(b0[:-1]), jnp.asarray(h))
    with pytest.raises(ValueError):
        clp_operator(g, jnp.asarray(b0), jnp.asarray(h[:2, :2]))


@pytest.mark.parametrize("norm", NORMS)
def test_lp_operator_is_ahat(rng, norm):
    g, _, _, _ = make_case(rng, "directed_loops_dups", N, 2)
    op = lp_operator(g, 3, normalization=norm, dtype=jnp.float64)
    ahat = ref.normalize(ref.graph_dense(g), norm)
    dense = np.asarray(op.to_dense())
    for c in range(3):
        np.testing.assert_allclose(dense[c], ahat, rtol=RTOL, atol=1e-12)


# ------------------------------------------------------------------------------------ spectral radius
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("kind", ["connected_undirected", "connected_directed"])
@pytest.mark.parametrize("k", [2, 5])
def test_spectral_radius_vs_eigvals(rng, kind, norm, k):
    n = 40
    g, b0, h, _ = make_case(rng, kind, n, k, train_frac=0.0)  # prior-only B0: irreducible operators
    info = spectral_radius(g, jnp.asarray(b0), jnp.asarray(h), normalization=norm, tol=1e-9, max_iters=5000)
    true = ref.spectral_radii(ref_ops(g, b0, h, norm))
    rho = np.asarray(info.rho)
    assert rho.shape == (k,)
    np.testing.assert_allclose(rho, true, rtol=1e-3)
    assert np.all(np.asarray(info.converged))
    its = np.asarray(info.iterations)
    assert np.all(its >= 1) and np.all(its <= 5000)
    slack = 1e-6 * true
    assert np.all(np.asarray(info.lower) <= true + slack), (np.asarray(info.lower), true)
    assert np.all(np.asarray(info.upper) >= true - slack), (np.asarray(info.upper), true)
    assert np.all(np.asarray(info.lower) <= rho + 1e-12) and np.all(rho <= np.asarray(info.upper) + 1e-12)
    assert np.all(np.asarray(info.row_sum_bound) >= true - slack)
    assert np.all(np.asarray(info.col_sum_bound) >= true - slack)
    ops = ref_ops(g, b0, h, norm)
    np.testing.assert_allclose(np.asarray(info.row_sum_bound), ops.sum(axis=2).max(axis=1), rtol=RTOL)
    np.testing.assert_allclose(np.asarray(info.col_sum_bound), ops.sum(axis=1).max(axis=1), rtol=RTOL)
    np.testing.assert_allclose(np.asarray(info.bound),
                               np.minimum(np.asarray(info.row_sum_bound), np.asarray(info.col_sum_bound)))


@pytest.mark.parametrize("norm", NORMS)
def test_spectral_radius_with_training_rows_bounds_hold(rng, norm):
    """One-hot training rows make A^F_k reducible; the estimate and the bounds must still be right."""
    n, k = 40, 5
    g, b0, h, _ = make_case(rng, "connected_undirected", n, k, train_frac=0.4)
    info = spectral_radius(g, jnp.asarray(b0), jnp.asarray(h), normalization=norm, tol=1e-10, max_iters=10000)
    true = ref.spectral_radii(ref_ops(g, b0, h, norm))
    slack = 1e-6 * true + 1e-12
    assert np.all(np.asarray(info.lower) <= true + slack)
    assert np.all(np.asarray(info.upper) >= true - slack)
    assert np.all(np.asarray(info.row_sum_bound) >= true - slack)
    assert np.all(np.asarray(info.col_sum_bound) >= true - slack)
    np.testing.assert_allclose(np.asarray(info.rho), true, rtol=1e-3)


def test_spectral_radius_known_values():
    # label propagation operator of an undirected graph with sym normalization has rho = 1;
    # star with 9 leaves, raw adjacency: rho = sqrt(9) = 3
    n = 10
    ei = np.stack([np.zeros(n - 1, int), np.arange(1, n)])
    g = Graph.from_edge_index(ei, n)
    ones = jnp.ones((n, 2))
    eye = jnp.eye(2)
    # b0 = 1, H = I: A^F_k = Ahat
    info = spectral_radius(g, ones, eye, normalization="none", tol=1e-12, max_iters=10000)
    np.testing.assert_allclose(np.asarray(info.rho), [3.0, 3.0], rtol=1e-6)
    info = spectral_radius(g, ones, eye, normalization="sym", tol=1e-12, max_iters=10000)
    np.testing.assert_allclose(np.asarray(info.rho), [1.0, 1.0], rtol=1e-6)
    # a DAG (directed path) is nilpotent: rho = 0
    gp = Graph.from_edge_index(np.array([[0, 1, 2], [1, 2, 3]]), 4, symmetrize=False)
    info = spectral_radius(gp, jnp.ones((4, 2)), jnp.eye(2), normalization="none", tol=1e-9, max_iters=10000)
    assert np.all(np.asarray(info.rho) <= 1e-3)
    assert np.all(np.asarray(info.lower) <= 1e-12)


def test_spectral_radius_no_recompile(rng, compile_counter):
    n, k = 40, 5
    g, b0, h, _ = make_case(rng, "connected_undirected", n, k)
    _, b0b, hb, _ = make_case(rng, "connected_undirected", n, k)
    a1 = (jnp.asarray(b0), jnp.asarray(h))
    a2 = (jnp.asarray(b0b), jnp.asarray(hb))
    jax.block_until_ready(spectral_radius(g, *a1))
    with compile_counter() as cc:
        jax.block_until_ready(spectral_radius(g, *a2))
    assert cc.count == 0


# ------------------------------------------------------------------------------------ transposed CSR
def _bare(g):
    """The same graph without the stored transposed CSR (a Graph built directly from arrays)."""
    return Graph(senders=g.senders, receivers=g.receivers, weights=g.weights, num_nodes=g.num_nodes,
                 symmetric=g.symmetric, indptr=g.indptr)


@pytest.mark.parametrize("k", [1, 2, 5])
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("kind", ["undirected", "directed_loops_dups"])
def test_rmatvec_transposed_csr_values_and_gradients(rng, kind, norm, k):
    """rmatvec through the stored transposed CSR (fused kernel on Ahat.T, values permuted) equals the dense
    transpose and the gather fallback of a Graph without it; gradients w.r.t. the ORIGINAL edge values,
    left, right and x agree with the fallback's (plain autodiff through gather + segment_sum)."""
    n = N
    g, b0, h, _ = make_case(rng, kind, n, k)
    assert g.transpose_perm is not None
    op = clp_operator(g, jnp.asarray(b0), jnp.asarray(h), normalization=norm)
    op_bare = op._replace(graph=_bare(g))
    ops = ref_ops(g, b0, h, norm)
    scale = max(1.0, np.abs(ops).max())
    x = jnp.asarray(rng.normal(size=(n, k)))
    out = np.asarray(op.rmatvec(x))
    np.testing.assert_allclose(out, np.einsum("kji,jk->ik", ops, np.asarray(x)), rtol=RTOL, atol=1e-6 * scale)
    np.testing.assert_allclose(out, np.asarray(op_bare.rmatvec(x)), rtol=1e-12, atol=1e-14)
    wt = jnp.asarray(rng.normal(size=(n, k)))

    def loss(o, values, left, right, xx):
        return jnp.sum(wt * o._replace(values=values, left=left, right=right).rmatvec(xx))

    args = (op.values, op.left, op.right, x)
    grads = jax.grad(lambda *a: loss(op, *a), argnums=(0, 1, 2, 3))(*args)
    ref_grads = jax.grad(lambda *a: loss(op_bare, *a), argnums=(0, 1, 2, 3))(*args)
    for name, a, b in zip(("values", "left", "right", "x"), grads, ref_grads):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-12, err_msg=name)
    # rows and column sums: the bound every solve computes, with and without the transposed CSR
    from jaxclp.operator import norm_bounds

    for a, b in zip(norm_bounds(op), norm_bounds(op_bare)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(norm_bounds(op)[1]), ops.sum(axis=1).max(axis=1), rtol=RTOL)


@pytest.mark.cpu_bitwise
def test_norm_bounds_has_no_edge_by_class_temporary(rng):
    """With the transposed CSR, norm_bounds (run by every solve) builds no (m, K) array: no value of its
    lowered program has m * K elements; the fallback (a Graph without it) gathers one. Uses the XLA path so
    the check does not depend on the C++ kernel being built."""
    from jaxclp.operator import norm_bounds
    from jaxclp.sparse import xla_path

    k = 7
    g, b0, h, _ = make_case(rng, "directed_loops_dups", N, k)
    op = clp_operator(g, jnp.asarray(b0), jnp.asarray(h))
    m = g.num_edges

    def has_mk(o):
        with xla_path():
            text = jax.jit(norm_bounds.__wrapped__).lower(o).as_text()
        return f"tensor<{m}x{k}x" in text or f"tensor<{m}x8x" in text

    assert not has_mk(op)
    assert has_mk(op._replace(graph=_bare(g)))


def test_norm_bounds_default_path_has_no_edge_by_class_temporary():
    """On the default backend's own path (no xla_path: the C++ kernel on CPU, the fused segment sum on CUDA)
    the compiled norm_bounds allocates no (m, K) temporary: its temporary bytes stay below half of one (m, K)
    array on a graph with m >> n (on CPU the fallback without the transposed CSR, on the XLA path, allocates
    one: checked first, so the bound can fail). On a GPU this is the check that XLA's BCSR gather is gone."""
    from jaxclp.operator import norm_bounds
    from jaxclp.sparse import kernel_available, xla_path

    n, k = 30, 7
    s, r = np.nonzero(~np.eye(n, dtype=bool))
    g = Graph.from_edge_index(np.stack([s, r]), n, symmetrize=False)
    rng = np.random.default_rng(0)
    b0 = rng.dirichlet(np.ones(k), n)
    op = clp_operator(g, jnp.asarray(b0), jnp.asarray(rng.dirichlet(np.ones(k), k)))
    mk = g.num_edges * k * 8

    def temp(o, force_xla=False):
        with xla_path() if force_xla else contextlib.nullcontext():
            return jax.jit(norm_bounds.__wrapped__).lower(o).compile().memory_analysis().temp_size_in_bytes

    if jax.default_backend() == "cpu":  # XLA:GPU fuses this fallback's gather (an H200: 14.6 kB here)
        assert temp(op._replace(graph=_bare(g)), force_xla=True) >= mk
        if not kernel_available():
            pytest.skip("the CPU path without the C++ kernel is XLA's (its lowered text is checked above)")
    assert temp(op) < mk / 2  # the (m,) permuted values (mk / 7) and a few (n, K) blocks fit below it
