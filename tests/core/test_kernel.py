"""The fused CPU kernel (jaxclp._kernels via the XLA FFI) against the XLA path, scipy and dense references.

Every comparison runs on both paths in one process: ``PATHS`` holds "kernel" (skipped when the extension is
not built, unless ``JAXCLP_REQUIRE_FFI=1``, which CI sets and which then fails instead) and "xla"
(``jaxclp.sparse.xla_path()``). The path is chosen at trace time, so each test traces fresh functions.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

from jaxclp import sparse as S

REQUIRE = os.environ.get("JAXCLP_REQUIRE_FFI", "") == "1"
HAVE = S.kernel_available()
PATHS = ["kernel", "xla"]


def _path(name):
    if name == "kernel":
        if not HAVE:
            if REQUIRE:
                pytest.fail(f"JAXCLP_REQUIRE_FFI=1 but the kernel is unavailable: {S.kernel_status()}")
            pytest.skip(f"kernel not built: {S.kernel_status()}")
        return contextlib.nullcontext()
    return S.xla_path()


def _graph(n, m, seed, empty_every=7):
    """Random CSR (rows = receivers sorted, senders sorted within a row), rows r % empty_every == 0 empty."""
    rng = np.random.default_rng(seed)
    r = rng.integers(0, n, m)
    r = r[r % empty_every != 0]
    s = rng.integers(0, n, r.shape[0])
    key = np.unique(r.astype(np.int64) * n + s)
    r, s = np.divmod(key, n)
    v = rng.random(r.shape[0]) + 0.1
    indptr = np.searchsorted(r, np.arange(n + 1))
    a = sp.csr_matrix((v, s, indptr), shape=(n, n))
    return a, (jnp.asarray(v), jnp.asarray(s, jnp.int32), jnp.asarray(r, jnp.int32), jnp.asarray(indptr, jnp.int32))


def _tol(dtype):
    return dict(rtol=2e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)


# n, m large enough (work = (m + n) K >= 2^15) that the kernel splits rows over the thread pool
BIG = (3000, 40000)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [1, 2, 5, 13, 40])
def test_forward_matches_scipy(path, dtype, k):
    a, (v, s, r, ip) = _graph(*BIG, seed=k)
    assert np.any(np.diff(a.indptr) == 0)  # empty rows present
    rng = np.random.default_rng(1)
    x, left, right = (rng.standard_normal((BIG[0], k)).astype(dtype) for _ in range(3))
    vv = v.astype(dtype)
    with _path(path):
        y = jax.jit(S.csr_matmul)(vv, s, r, ip, jnp.asarray(x))
        f = jax.jit(S.factored_matmul)(vv, s, r, ip, jnp.asarray(left), jnp.asarray(right), jnp.asarray(x))
    a = a.astype(dtype)
    assert y.dtype == dtype and f.dtype == dtype
    np.testing.assert_allclose(np.asarray(y), a @ x, **_tol(dtype))
    np.testing.assert_allclose(np.asarray(f), left * (a @ (right * x)), **_tol(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [1, 2, 5, 13])
def test_kernel_equals_xla_path(dtype, k):
    _path("kernel")
    a, (v, s, r, ip) = _graph(500, 4000, seed=10 + k)
    rng = np.random.default_rng(2)
    args = [jnp.asarray(rng.random((500, k)).astype(dtype)) for _ in range(3)]
    fn = lambda *z: S.factored_matmul(v.astype(dtype), s, r, ip, *z)  # noqa: E731
    with S.xla_path():
        ref = jax.jit(fn)(*args)
    out = jax.jit(fn)(*args)
    np.testing.assert_allclose(np.asarray(out), np.asarray(ref), **_tol(dtype))


@pytest.mark.cpu_bitwise
def test_kernel_is_the_cpu_lowering():
    """With the kernel on, the compiled CPU program calls it; on the XLA path it does not."""
    _path("kernel")
    _, (v, s, r, ip) = _graph(50, 200, seed=3)
    x = jnp.ones((50, 5))
    fn = lambda x: S.factored_matmul(v, s, r, ip, x, x, x)  # noqa: E731
    assert "@jaxclp_csr_mm_scaled(" in jax.jit(fn).lower(x).as_text()
    with S.xla_path():
        assert "jaxclp_csr_mm" not in jax.jit(lambda x: fn(x) + 0).lower(x).as_text()
    assert "@jaxclp_csr_mm(" in jax.jit(lambda x: S.csr_matmul(v, s, r, ip, x)).lower(x).as_text()


@pytest.mark.parametrize("path", PATHS)
def test_no_edges_and_single_row(path):
    n = 4
    v = jnp.zeros((0,))
    s = jnp.zeros((0,), jnp.int32)
    ip = jnp.zeros((n + 1,), jnp.int32)
    x = jnp.ones((n, 3))
    with _path(path):
        out = jax.jit(S.factored_matmul)(v, s, s, ip, x, x, x)
    np.testing.assert_array_equal(np.asarray(out), np.zeros((n, 3)))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("k", [1, 5])
def test_gradients_match_dense(path, k):
    """Gradients w.r.t. values, left, right and x against autodiff of the dense product."""
    n = 60
    a, (v, s, r, ip) = _graph(n, 400, seed=20 + k, empty_every=5)
    rng = np.random.default_rng(4)
    left, right, x, w = (jnp.asarray(rng.standard_normal((n, k))) for _ in range(4))

    def loss_sparse(v, left, right, x):
        return jnp.sum(w * S.factored_matmul(v, s, r, ip, left, right, x) ** 2)

    def loss_dense(v, left, right, x):
        dense = jnp.zeros((n, n)).at[r, s].add(v)
        return jnp.sum(w * (left * (dense @ (right * x))) ** 2)

    with _path(path):
        got = jax.jit(jax.grad(loss_sparse, argnums=(0, 1, 2, 3)))(v, left, right, x)
        gy = jax.jit(jax.grad(lambda v, y: jnp.sum(w * S.csr_matmul(v, s, r, ip, y) ** 2), argnums=(0, 1)))(v, x)
    want = jax.grad(loss_dense, argnums=(0, 1, 2, 3))(v, left, right, x)
    for g, h in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(h), rtol=1e-10, atol=1e-10)
    dense = np.asarray(a.todense())
    yy = dense @ np.asarray(x)
    np.testing.assert_allclose(np.asarray(gy[1]), dense.T @ (2 * np.asarray(w) * yy), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(np.asarray(gy[0]), np.sum((2 * np.asarray(w) * yy)[np.asarray(r)]
                                                         * np.asarray(x)[np.asarray(s)], axis=1), rtol=1e-10)


def test_gradient_finite_difference_float64():
    _path("kernel")
    n, k = 40, 3
    _, (v, s, r, ip) = _graph(n, 200, seed=5)
    rng = np.random.default_rng(6)
    left, right, x = (jnp.asarray(rng.random((n, k))) for _ in range(3))
    f = lambda t: jnp.sum(jnp.sin(S.factored_matmul(v, s, r, ip, left + t, right, x)))  # noqa: E731
    g = jax.grad(lambda left: jnp.sum(jnp.sin(S.factored_matmul(v, s, r, ip, left, right, x))))(left)
    eps = 1e-6
    fd = (f(eps) - f(-eps)) / (2 * eps)
    np.testing.assert_allclose(float(jnp.sum(g)), float(fd), rtol=1e-6)


@pytest.mark.parametrize("path", PATHS)
def test_vmap_over_x_and_scalings(path):
    n, k, b = 300, 5, 3
    a, (v, s, r, ip) = _graph(n, 3000, seed=7)
    rng = np.random.default_rng(8)
    xs = rng.random((b, n, k))
    ls = rng.random((b, n, k))
    right = rng.random((n, k))
    with _path(path):
        out_x = jax.jit(jax.vmap(lambda x: S.factored_matmul(v, s, r, ip, jnp.asarray(ls[0]), jnp.asarray(right),
                                                             x)))(jnp.asarray(xs))
        out_l = jax.jit(jax.vmap(lambda le, x: S.factored_matmul(v, s, r, ip, le, jnp.asarray(right), x)))(
            jnp.asarray(ls), jnp.asarray(xs))
        out_v = jax.jit(jax.vmap(lambda vv: S.csr_matmul(vv, s, r, ip, jnp.asarray(xs[0]))))(
            jnp.stack([v, 2 * v]))
        gv = jax.jit(jax.vmap(jax.grad(lambda x: jnp.sum(S.factored_matmul(v, s, r, ip, x, x, x)))))(
            jnp.asarray(xs))
    for i in range(b):
        np.testing.assert_allclose(np.asarray(out_x[i]), ls[0] * (a @ (right * xs[i])), rtol=1e-12)
        np.testing.assert_allclose(np.asarray(out_l[i]), ls[i] * (a @ (right * xs[i])), rtol=1e-12)
        # d/dx sum(x * A(x * x)) = A(x*x) + 2 x * A^T x
        want = a @ (xs[i] ** 2) + 2 * xs[i] * (a.T @ xs[i])
        np.testing.assert_allclose(np.asarray(gv[i]), want, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(out_v[1]), 2 * (a @ xs[0]), rtol=1e-12)


@pytest.mark.parametrize("path", PATHS)
def test_inside_fori_loop(path):
    """Ten propagation steps x <- 0.5 * left * A (right * x) + b0 inside lax.fori_loop."""
    n, k = 400, 5
    a, (v, s, r, ip) = _graph(n, 4000, seed=9)
    a = a.multiply(1.0 / max(1.0, np.abs(a).sum(axis=1).max()))
    v = jnp.asarray(a.data)
    rng = np.random.default_rng(10)
    left, right, b0 = (rng.random((n, k)) for _ in range(3))

    def run(b0):
        body = lambda _, x: 0.5 * S.factored_matmul(v, s, r, ip, left, right, x) + b0  # noqa: E731
        return jax.lax.fori_loop(0, 10, body, b0)

    with _path(path):
        got = jax.jit(run)(jnp.asarray(b0))
    x = b0.copy()
    for _ in range(10):
        x = 0.5 * left * (a @ (right * x)) + b0
    np.testing.assert_allclose(np.asarray(got), x, rtol=1e-12)


def test_operator_matvec_agrees():
    """FactoredOperator.matvec (graph.spmm) and factored_matmul compute the same step."""
    import jaxclp

    g = jaxclp.Graph.from_edge_index(np.array([[0, 1, 2, 3, 3], [1, 2, 0, 0, 1]]), num_nodes=5, symmetrize=True)
    rng = np.random.default_rng(11)
    b0 = jnp.asarray(rng.random((5, 3)))
    op = jaxclp.clp_operator(g, b0, jnp.eye(3))
    x = jnp.asarray(rng.random((5, 3)))
    want = op.matvec(x)
    got = S.factored_matmul(op.values, g.senders, g.receivers, g.indptr, op.left, op.right, x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12)


def test_bad_shapes_raise():
    _, (v, s, r, ip) = _graph(10, 30, seed=12)
    x = jnp.ones((10, 2))
    with pytest.raises(ValueError, match="left"):
        S.factored_matmul(v, s, r, ip, jnp.ones((10, 3)), x, x)
    with pytest.raises(ValueError, match="values"):
        S.factored_matmul(v[:-1], s, r, ip, x, x, x)
    with pytest.raises(ValueError, match="x must be"):
        S.factored_matmul(v, s, r, ip, x, x, jnp.ones(10))


def test_missing_kernel_warns_once(monkeypatch):
    """Without the extension: one RuntimeWarning at first use, then silence; results from the XLA path."""
    monkeypatch.setattr(S, "_state", {"checked": True, "available": False, "reason": "ImportError: test",
                                      "warned": False, "disabled_env": False})
    _, (v, s, r, ip) = _graph(20, 60, seed=13)
    x = jnp.ones((20, 4))
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        a = jax.jit(lambda x: S.csr_matmul(v, s, r, ip, x))(x)
        b = jax.jit(lambda x: S.factored_matmul(v, s, r, ip, x, x, x) + 1)(x)
    msgs = [str(w.message) for w in rec if issubclass(w.category, RuntimeWarning)]
    assert len(msgs) == 1 and "not available" in msgs[0] and "JAXCLP_NO_FFI" in msgs[0]
    assert "jaxclp_csr_mm" not in jax.jit(lambda x: S.csr_matmul(v, s, r, ip, x) * 2).lower(x).as_text()
    np.testing.assert_allclose(np.asarray(b), np.asarray(a) + 1, rtol=1e-12)


_SUB = """
import json, sys, warnings
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp, numpy as np
from jaxclp import sparse as S
rng = np.random.default_rng(0)
n, m, k = 500, 5000, 5
r = np.sort(rng.integers(0, n, m)); s = rng.integers(0, n, m)
key = np.unique(r * n + s); r, s = np.divmod(key, n)
v = jnp.asarray(rng.random(r.size)); ip = jnp.asarray(np.searchsorted(r, np.arange(n + 1)), jnp.int32)
x, le, ri = (jnp.asarray(rng.random((n, k))) for _ in range(3))
with warnings.catch_warnings(record=True) as rec:
    warnings.simplefilter("always")
    out = default = jax.jit(S.factored_matmul)(v, jnp.asarray(s, jnp.int32), jnp.asarray(r, jnp.int32), ip, le, ri, x)
    if sys.argv[1] == "xla":
        with S.xla_path():
            out = jax.jit(lambda *a: S.factored_matmul(*a) + 0)(v, jnp.asarray(s, jnp.int32),
                                                               jnp.asarray(r, jnp.int32), ip, le, ri, x)
print(json.dumps({"available": S.kernel_available(), "status": S.kernel_status(), "warnings": len(rec),
                  "out": np.asarray(out).ravel().tolist(), "default": np.asarray(default).ravel().tolist()}))
"""


def _sub(env_extra, mode):
    env = {**os.environ, **env_extra}
    p = subprocess.run([sys.executable, "-c", _SUB, mode], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.cpu_bitwise
def test_env_var_forces_identical_fallback():
    """JAXCLP_NO_FFI=1 in a fresh process: no kernel, no warning, and results bitwise equal to the in-process
    XLA path (xla_path()); with the kernel built they also agree with it to rounding. (Two processes: the second
    computes the default path, then the XLA path.)"""
    off = _sub({"JAXCLP_NO_FFI": "1"}, "default")
    assert off["available"] is False and "JAXCLP_NO_FFI" in off["status"] and off["warnings"] == 0
    on = _sub({"JAXCLP_NO_FFI": "0"}, "xla")
    assert off["out"] == on["out"]
    if HAVE:
        assert on["available"] is True and on["warnings"] == 0
        np.testing.assert_allclose(on["default"], off["out"], rtol=1e-12)


# ------------------------------------------------------------------ the SDDMM kernel and the planned product


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [1, 5, 16, 17, 40])
def test_sddmm_matches_numpy(path, dtype, k):
    """out[e] = g[r_e] . y[s_e] over the nonzeros (the cotangent of a CSR product's values)."""
    a, (v, s, r, ip) = _graph(*BIG, seed=30 + k)
    rng = np.random.default_rng(k)
    g, y = (rng.standard_normal((BIG[0], k)).astype(dtype) for _ in range(2))
    with _path(path):
        out = jax.jit(S._sddmm)(s, r, ip, jnp.asarray(g), jnp.asarray(y))
    assert out.shape == s.shape and out.dtype == dtype
    want = np.sum(g[np.asarray(r)] * y[np.asarray(s)], axis=1)
    np.testing.assert_allclose(np.asarray(out), want, **_tol(dtype))


@pytest.mark.cpu_bitwise
def test_sddmm_is_the_gradient_lowering():
    """With the kernel on, the gradient w.r.t. the values calls the SDDMM kernel; an extension built before
    that target existed (registrations without it) falls back to the XLA gathers with the same result."""
    _path("kernel")
    _, (v, s, r, ip) = _graph(50, 300, seed=3)
    x = jnp.asarray(np.random.default_rng(0).standard_normal((50, 4)))
    grad = lambda v: jax.grad(lambda v: jnp.sum(S.csr_matmul(v, s, r, ip, x) ** 2))(v)  # noqa: E731
    assert "@jaxclp_csr_sddmm(" in jax.jit(grad).lower(v).as_text()
    want = np.asarray(jax.jit(grad)(v))
    old = S._state["targets"]
    try:
        S._state["targets"] = frozenset({"jaxclp_csr_mm", "jaxclp_csr_mm_scaled"})
        stale = jax.jit(lambda v: grad(v) + 0)
        assert "jaxclp_csr_sddmm" not in stale.lower(v).as_text()
        np.testing.assert_allclose(np.asarray(stale(v)), want, rtol=1e-12)
    finally:
        S._state["targets"] = old


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("k", [1, 6])
def test_planned_product_and_gradients_match_dense(path, k):
    """csr_matmul_planned on a non-symmetric matrix: forward against scipy, gradients w.r.t. values and y
    against autodiff of the dense product, the transpose plan against scipy's transpose."""
    n = 70
    a, (v, s, r, ip) = _graph(n, 500, seed=40 + k, empty_every=6)
    assert abs(a - a.T).max() > 0  # not symmetric: the transposed product matters
    rng = np.random.default_rng(5)
    x, w = (jnp.asarray(rng.standard_normal((n, k))) for _ in range(2))
    with _path(path):
        plan = jax.jit(S.transpose_plan, static_argnums=2)(s, r, n)
        out = jax.jit(S.csr_matmul_planned)(v, s, r, plan, x)
        got = jax.jit(jax.grad(lambda v, y: jnp.sum(w * S.csr_matmul_planned(v, s, r, plan, y) ** 2),
                               argnums=(0, 1)))(v, x)
    t = a.T.tocsr()
    np.testing.assert_array_equal(np.asarray(plan.t_indptr), t.indptr)
    np.testing.assert_array_equal(np.asarray(r)[np.asarray(plan.order)], t.indices)
    np.testing.assert_allclose(np.asarray(out), a @ np.asarray(x), rtol=1e-12, atol=1e-12)

    def loss_dense(v, y):
        return jnp.sum(w * (jnp.zeros((n, n)).at[r, s].add(v) @ y) ** 2)

    want = jax.grad(loss_dense, argnums=(0, 1))(v, x)
    for g, h in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(h), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("path", PATHS)
def test_planned_gradient_under_vmap(path):
    """vmapped over a batch of right-hand sides and edge values (GNN fits vmapped over splits)."""
    n, k, b = 120, 4, 3
    a, (v, s, r, ip) = _graph(n, 900, seed=11)
    rng = np.random.default_rng(12)
    xs = jnp.asarray(rng.standard_normal((b, n, k)))
    vs = jnp.asarray(rng.random((b, v.shape[0])) + 0.1)
    plan = S.transpose_plan(s, r, n)
    f = lambda vv, y: jnp.sum(jnp.sin(S.csr_matmul_planned(vv, s, r, plan, y)))  # noqa: E731
    with _path(path):
        got = jax.jit(jax.vmap(jax.grad(f, argnums=(0, 1))))(vs, xs)
    for i in range(b):
        dense = lambda vv, y: jnp.sum(jnp.sin(jnp.zeros((n, n)).at[r, s].add(vv) @ y))  # noqa: E731
        want = jax.grad(dense, argnums=(0, 1))(vs[i], xs[i])
        for g, h in zip(got, want):
            np.testing.assert_allclose(np.asarray(g[i]), np.asarray(h), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("path", ["segment", "cusparse", "xla"])
def test_gpu_product_paths_equal_scipy(path, rng):
    """The CUDA paths of the CSR product (``JAXCLP_GPU_SPMM``), called directly (off CUDA the cuSPARSE
    primitive runs its COO fallback): each equals scipy's product, duplicate edges and empty rows included."""
    import scipy.sparse as sp

    from jaxclp import sparse as S

    n, m, k = 40, 300, 5
    r = np.sort(rng.integers(0, n - 3, m))  # the last 3 rows empty
    s = rng.integers(0, n, m)
    order = np.lexsort((s, r))
    r, s = r[order], s[order]
    v = rng.random(m)
    y = rng.standard_normal((n, k))
    want = sp.csr_matrix((v, (r, s)), shape=(n, n)) @ y
    mm = S._GPU_MM[path]
    ip = S.host_row_pointers(r, n)
    got = jax.jit(mm)(jnp.asarray(v), jnp.asarray(s, jnp.int32), jnp.asarray(r, jnp.int32), ip, jnp.asarray(y))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)


def test_gpu_product_path_env_is_checked(monkeypatch):
    from jaxclp import sparse as S

    monkeypatch.setenv(S.GPU_SPMM_ENV, "cuSPARSE")
    assert S._gpu_spmm() == "cusparse"
    monkeypatch.delenv(S.GPU_SPMM_ENV)
    assert S._gpu_spmm() == "segment"
    monkeypatch.setenv(S.GPU_SPMM_ENV, "bcsr")
    with pytest.raises(ValueError, match="JAXCLP_GPU_SPMM must be one of"):
        S._gpu_spmm()
