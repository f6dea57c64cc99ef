"""Sparse node features: :mod:`jaxclp.features` and the MLP's sparse first layer (never densified)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

import jaxclp
from jaxclp.features import SparseFeatures, as_features, matmul
from jaxclp.mlp import MLP
from jaxclp.mlp import fit_mlp_splits


def _random_csr(rng, n=40, d=25, density=0.15):
    x = sp.random(n, d, density=density, random_state=rng, format="csr", dtype=np.float64)
    x.data = rng.normal(size=x.data.shape)
    x = x.tolil()
    x[3, :] = 0  # an empty row
    return x.tocsr()


def test_as_features_roundtrip_duplicates_zeros_unsorted(rng):
    # COO with a duplicate entry, an explicit zero and unsorted rows
    rows = np.array([2, 0, 2, 1, 0])
    cols = np.array([1, 3, 1, 0, 2])
    vals = np.array([1.5, 2.0, 0.25, 0.0, -1.0])
    x = sp.coo_matrix((vals, (rows, cols)), shape=(4, 5))
    f = as_features(x)
    assert isinstance(f, SparseFeatures) and f.shape == (4, 5) and f.dtype == jnp.float64
    assert f.nnz == 3  # duplicate summed, zero dropped
    assert np.all(np.diff(np.asarray(f.rows)) >= 0)
    np.testing.assert_array_equal(np.asarray(f.todense()), x.toarray())
    # integer/bool sparse input becomes float32; dense stays dense
    assert as_features(sp.csr_matrix(np.eye(3, dtype=bool))).dtype == jnp.float32
    assert isinstance(as_features(np.ones((3, 2))), jax.Array)
    with pytest.raises(ValueError, match="features must be a numeric array"):
        as_features(np.array([["a", "b"]]))


def test_sparse_matmul_matches_dense_float64(rng):
    x = _random_csr(rng)
    w = jnp.asarray(rng.normal(size=(x.shape[1], 7)))
    f = as_features(x)
    out = jax.jit(matmul)(f, w)
    np.testing.assert_allclose(np.asarray(out), x.toarray() @ np.asarray(w), rtol=0, atol=1e-12)
    assert np.all(np.asarray(out)[3] == 0)


def test_sparse_matmul_gradient(rng):
    """Gradient w.r.t. W (and the values) equals the dense one and a central finite difference."""
    x = _random_csr(rng, n=12, d=9, density=0.3)
    f = as_features(x)
    w = jnp.asarray(rng.normal(size=(9, 4)))
    c = jnp.asarray(rng.normal(size=(12, 4)))
    loss_s = lambda w, v: jnp.sum(jnp.tanh(matmul(SparseFeatures(f.rows, f.cols, v, f.shape), w)) * c)
    loss_d = lambda w: jnp.sum(jnp.tanh(jnp.asarray(x.toarray()) @ w) * c)
    gw, gv = jax.grad(loss_s, argnums=(0, 1))(w, f.values)
    np.testing.assert_allclose(np.asarray(gw), np.asarray(jax.grad(loss_d)(w)), atol=1e-12)
    eps = 1e-6
    for i, j in [(0, 0), (4, 2), (8, 3)]:
        e = jnp.zeros_like(w).at[i, j].set(eps)
        fd = (loss_s(w + e, f.values) - loss_s(w - e, f.values)) / (2 * eps)
        np.testing.assert_allclose(float(gw[i, j]), float(fd), rtol=1e-6, atol=1e-9)
    k = 5
    e = jnp.zeros_like(f.values).at[k].set(eps)
    fd = (loss_s(w, f.values + e) - loss_s(w, f.values - e)) / (2 * eps)
    np.testing.assert_allclose(float(gv[k]), float(fd), rtol=1e-6, atol=1e-9)


def test_plan_path_equals_segment_path_and_finite_difference(rng):
    """as_features builds the CSR plan (row pointers, column order, column pointers of a hand-checked matrix);
    the planned product (CSR kernel), its vmap over W and its gradients equal the unplanned gather + segment
    sum exactly (same sums, same order) and a central finite difference, float64."""
    x = sp.csr_matrix(np.array([[0., 2., 0.], [0., 0., 0.], [1., 0., 3.], [0., 4., 5.]]))
    f = as_features(x)
    np.testing.assert_array_equal(np.asarray(f.plan.indptr), [0, 1, 1, 3, 5])
    np.testing.assert_array_equal(np.asarray(f.cols)[np.asarray(f.plan.order)], [0, 1, 1, 2, 2])
    np.testing.assert_array_equal(np.asarray(f.rows)[np.asarray(f.plan.order)], [2, 0, 3, 2, 3])
    np.testing.assert_array_equal(np.asarray(f.plan.t_indptr), [0, 1, 3, 5])

    x = _random_csr(rng, n=30, d=20, density=0.2)
    f = as_features(x)
    g = SparseFeatures(f.rows, f.cols, f.values, f.shape)  # no plan: the segment-sum path
    assert f.plan is not None and g.plan is None
    w = jnp.asarray(rng.normal(size=(20, 6)))
    c = jnp.asarray(rng.normal(size=(30, 6)))
    if jax.default_backend() == "cpu":  # same sums in the same order: exact (XLA:GPU's atomic adds reorder them)
        np.testing.assert_array_equal(np.asarray(jax.jit(matmul)(f, w)), np.asarray(matmul(g, w)))
    np.testing.assert_allclose(np.asarray(jax.jit(matmul)(f, w)), np.asarray(matmul(g, w)), rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(matmul(f, w)), x.toarray() @ np.asarray(w), rtol=0, atol=1e-12)
    ws = jnp.stack([w, 2 * w, -w])
    np.testing.assert_allclose(np.asarray(jax.vmap(lambda v: matmul(f, v))(ws)),
                               np.asarray(jax.vmap(lambda v: matmul(g, v))(ws)), rtol=0, atol=1e-12)
    loss = lambda w, v, base: jnp.sum(jnp.tanh(matmul(base.with_values(v), w)) * c)
    gw, gv = jax.grad(loss, argnums=(0, 1))(w, f.values, f)
    gw0, gv0 = jax.grad(loss, argnums=(0, 1))(w, f.values, g)
    np.testing.assert_allclose(np.asarray(gw), np.asarray(gw0), rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(gv), np.asarray(gv0), rtol=0, atol=1e-12)
    eps = 1e-6
    for i, j in [(0, 0), (7, 3), (19, 5)]:
        e = jnp.zeros_like(w).at[i, j].set(eps)
        fd = (loss(w + e, f.values, f) - loss(w - e, f.values, f)) / (2 * eps)
        np.testing.assert_allclose(float(gw[i, j]), float(fd), rtol=1e-6, atol=1e-9)
    # a plan-less SparseFeatures gets its plan from as_features (the same plan as from the CSR)
    h = as_features(g)
    for a, b in zip(h.plan, f.plan):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # columns unsorted within a row: reordered into CSR order, same product
    u = SparseFeatures(jnp.asarray([0, 0, 2, 2]), jnp.asarray([3, 1, 4, 0]), jnp.asarray([1.0, 2.0, 3.0, 4.0]),
                       (3, 5)).with_plan()
    np.testing.assert_array_equal(np.asarray(u.cols), [1, 3, 0, 4])
    np.testing.assert_array_equal(np.asarray(u.values), [2.0, 1.0, 4.0, 3.0])
    w5 = jnp.asarray(rng.normal(size=(5, 2)))
    np.testing.assert_allclose(np.asarray(matmul(u, w5)), np.asarray(u.todense() @ w5), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="rows must be sorted"):
        SparseFeatures(f.rows[::-1], f.cols, f.values, f.shape).with_plan()
    # the plan survives astype / with_values and the pytree round trip (jit argument)
    assert f.astype(jnp.float32).plan is f.plan
    leaves, tree = jax.tree_util.tree_flatten(f)
    assert len(leaves) == 6 and jax.tree_util.tree_unflatten(tree, leaves).plan is not None


def test_adjacency_rows_uses_the_graph_transpose(rng):
    from jaxclp.priors import adjacency_rows
    syn = jaxclp.datasets.synthetic(h=0.3, avg_degree=4, num_classes=3, nodes_per_class=10, seed=0)
    a = adjacency_rows(syn.graph, jnp.float64)
    assert a.plan is not None
    w = jnp.asarray(rng.normal(size=(a.shape[1], 4)))
    dense = np.zeros(a.shape)
    np.add.at(dense, (np.asarray(syn.graph.receivers), np.asarray(syn.graph.senders)), np.asarray(syn.graph.weights))
    np.testing.assert_allclose(np.asarray(matmul(a, w)), dense @ np.asarray(w), rtol=0, atol=1e-12)
    gw = jax.grad(lambda w: jnp.sum(matmul(a, w) ** 2))(w)
    np.testing.assert_allclose(np.asarray(gw), 2 * dense.T @ (dense @ np.asarray(w)), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("hidden", [(), (16,), (16, 8)])
def test_mlp_sparse_equals_dense_float64(rng, hidden):
    x = _random_csr(rng)
    model = MLP(hidden=hidden, num_classes=3, dropout=0.5)
    params = model.init(jax.random.key(0), jnp.zeros((1, x.shape[1])), train=False)
    params = jax.tree_util.tree_map(lambda a: a.astype(jnp.float64), params)
    dense = model.apply(params, jnp.asarray(x.toarray()), train=False)
    sparse = model.apply(params, as_features(x), train=False)
    assert sparse.dtype == jnp.float64
    np.testing.assert_allclose(np.asarray(sparse), np.asarray(dense), rtol=0, atol=1e-10)
    # training mode (dropout keyed identically) and the parameter gradient agree too
    key = {"dropout": jax.random.key(3)}
    loss = lambda p, xx: jnp.sum(model.apply(p, xx, train=True, rngs=key) ** 2)
    gd = jax.grad(loss)(params, jnp.asarray(x.toarray()))
    gs = jax.grad(loss)(params, as_features(x))
    jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-10),
                           gd, gs)


def _task(rng, n=90, d=30, k=3):
    y = rng.integers(0, k, n)
    x = sp.random(n, d, density=0.1, random_state=rng, format="csr", dtype=np.float32)
    x = (x + sp.csr_matrix((np.ones(n, np.float32), (np.arange(n), y)), shape=(n, d))).tocsr()  # signal
    tm = rng.random(n) < 0.4
    vm = ~tm & (rng.random(n) < 0.5)
    return x, y, tm, vm


@pytest.mark.cpu_bitwise
def test_fit_mlp_and_splits_accept_scipy_sparse(rng):
    x, y, tm, vm = _task(rng)
    cfg = jaxclp.TrainConfig(epochs=5, patience=0)
    kw = dict(num_classes=3, hidden=(8,), cfg=cfg)
    # (fit_mlp itself: sparse vs dense in test_clp_fit_on_scipy_csr)
    keys = jax.random.split(jax.random.key(1), 2)
    tms, vms = np.stack([tm, vm]), np.stack([vm, tm])
    rs = fit_mlp_splits(keys, x, jnp.asarray(y), jnp.asarray(tms), jnp.asarray(vms), **kw)
    rd = fit_mlp_splits(keys, jnp.asarray(x.toarray()), jnp.asarray(y), jnp.asarray(tms),
                        jnp.asarray(vms), **kw)
    assert rs.prior.shape == (2, len(y), 3)
    np.testing.assert_allclose(np.asarray(rs.prior), np.asarray(rd.prior), atol=1e-5)
    with pytest.raises(ValueError, match="features contains 1 NaN"):
        xb = x.copy()
        xb.data[0] = np.nan
        jaxclp.fit_mlp(jax.random.key(0), xb, jnp.asarray(y), jnp.asarray(tm), jnp.asarray(vm), **kw)


@pytest.mark.cpu_bitwise
def test_clp_fit_on_scipy_csr(rng):
    x, y, tm, vm = _task(rng)
    syn = jaxclp.datasets.synthetic(h=0.3, avg_degree=4, num_classes=3, nodes_per_class=30, seed=0)
    y = np.asarray(syn.labels)
    x = (x[:, 3:] + sp.csr_matrix((np.ones(90, np.float32), (np.arange(90), y)), shape=(90, 27))).tocsr()
    kw = dict(hidden=(8,), epochs=5, patience=0, alphas=(0.5,))
    ms = jaxclp.CLP(**kw).fit(syn.graph, x, y, tm, vm)
    md = jaxclp.CLP(**kw).fit(syn.graph, x.toarray(), y, tm, vm)
    np.testing.assert_allclose(np.asarray(ms.prior_), np.asarray(md.prior_), atol=1e-5)
    np.testing.assert_allclose(np.asarray(ms.predict_proba()), np.asarray(md.predict_proba()), atol=1e-4)
    with pytest.raises(ValueError, match=r"features must have shape \(90, \?\)"):
        jaxclp.CLP(**kw).fit(syn.graph, x[:-1], y, tm, vm)


def test_mostly_zero_features_are_given_to_the_models_as_csr():
    """node_features: CSR where at most 5 % of >= 2^20 entries are nonzero (dense or sparse input alike), dense
    otherwise; the runner's record says so ("given/csr") only where density alone made them CSR."""
    from jaxclp.datasets import featurize
    from jaxclp.experiments import runner

    r = np.random.default_rng(0)
    n, d = 1100, 1000  # 1.1M entries
    sparse_x = np.where(r.random((n, d)) < 0.01, 1.0, 0.0).astype(np.float32)
    dense_x = np.where(r.random((n, d)) < 0.10, 1.0, 0.0).astype(np.float32)
    assert featurize.sparse_by_density(sparse_x) and featurize.sparse_by_density(sp.csr_matrix(sparse_x))
    assert not featurize.sparse_by_density(dense_x)
    assert not featurize.sparse_by_density(sparse_x[:500])  # 0.5M entries: too small to bother
    syn = jaxclp.datasets.synthetic(0.3, 3, num_classes=2, nodes_per_class=n // 2, seed=0)
    for x, want_csr in ((sparse_x, True), (sp.csr_matrix(sparse_x), True), (dense_x, False),
                        (sp.csr_matrix(dense_x), False)):
        ds = dataclasses.replace(syn, features=x)
        f, kind = jaxclp.datasets.node_features(ds)
        assert sp.issparse(f) == want_csr and kind == "given"
        np.testing.assert_array_equal(f.toarray() if sp.issparse(f) else f, sparse_x if want_csr else dense_x)
        assert runner.node_features(ds)[1] == ("given/csr" if want_csr else "given")
        f0, _ = jaxclp.datasets.node_features(ds, max_density=0.0)
        assert not sp.issparse(f0)
