"""Fast CSR sparse-dense products for receiver-sorted edge lists.

Products, all pure and jittable, differentiable (``custom_vjp``) and fast under ``vmap``
(``custom_vmap``):

* :func:`csr_matmul`: ``out[r] = sum_{e: s->r} values[e] * y[s]`` for an (n, K) block ``y`` (also
  :func:`csr_matmul_symmetric` and :func:`csr_matmul_planned`, whose gradients need no per-call sort);
* :func:`factored_matmul`: the CLP step ``out = left * (Ahat @ (right * x))`` in one operation.

**Paths.** On CPU both run a fused C++ kernel called through the XLA FFI (``csrc/jaxclp_kernels.cc``, the
optional extension ``jaxclp._kernels`` built by ``pip install``): one pass over the CSR, rows split into
chunks of equal nonzeros over XLA's own CPU thread pool, float32/float64, any K. The kernel is registered for
the "cpu" platform only and selected with ``jax.lax.platform_dependent``. On CUDA the product is a gather plus
sorted ``segment_sum``, which XLA:GPU fuses into one scatter-add with no temporary buffer (``JAXCLP_GPU_SPMM``,
read at trace time: ``segment`` (default), ``cusparse`` (cuSPARSE's SpMM through the ``csr_matmat`` primitive,
deterministic, slower at K = 5) or ``xla``); BCSR @ dense, XLA's own CSR product, allocates ~16 bytes per edge
per call there and is 1.2-1.4x faster at K = 5 (an H200: ``benchmarks/results/gpu_spmm.md``). The XLA path
(other platforms, and the CPU fallback) is ``jax.experimental.sparse.BCSR @ dense`` with the columns padded to
a multiple of 8 (XLA:CPU's CSR kernel vectorizes only then) for K >= :data:`CSR_MIN_COLUMNS`, and a gather plus
sorted ``segment_sum`` for fewer columns. Timings: ``benchmarks/results/throughput.md``.

The fallback is used when the extension is not built (one ``RuntimeWarning`` at first use) or when the
environment variable ``JAXCLP_NO_FFI=1`` is set (read at first use). The path is chosen when a function is
traced: :func:`xla_path` forces the XLA path for code traced inside it (tests, benchmarks).

Custom rules:

* ``custom_vmap``: a batch of right-hand sides (e.g. ``solve`` vmapped over alphas, GMRES vmapped over
  classes) is folded into the columns: one wide product instead of the generic batched lowering (~10x slower).
* ``custom_vjp``: the cotangent of ``y`` is the transposed product (a CSR sorted by sender, built in the
  backward pass, or once per fit in a :class:`TransposePlan` for :func:`csr_matmul_planned`), and the
  cotangent of ``values`` is ``sum_k g[r_e, k] * y[s_e, k]`` (a third kernel, ``jaxclp_csr_sddmm``, one pass
  over the rows with ``g[r]`` in registers; a gather of two (m, K) arrays on the XLA path); for
  :func:`factored_matmul` also the cotangents of ``left`` and ``right``.
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import sparse as jsp

CSR_MIN_COLUMNS = 3
NO_FFI_ENV = "JAXCLP_NO_FFI"
GPU_SPMM_ENV = "JAXCLP_GPU_SPMM"
_PAD = 8

# ----------------------------------------------------------------------------------------------- kernel loading

_lock = threading.Lock()
_state: dict = {"checked": False, "available": False, "reason": None, "warned": False, "disabled_env": False,
                "targets": frozenset()}
_force = threading.local()


def _env_disabled() -> bool:
    return os.environ.get(NO_FFI_ENV, "").strip().lower() not in ("", "0", "false", "no")


def _load() -> None:
    with _lock:
        if _state["checked"]:
            return
        _state["checked"] = True
        if _env_disabled():
            _state["disabled_env"] = True
            _state["reason"] = f"{NO_FFI_ENV} is set"
            return
        try:
            from jaxclp import _kernels  # the optional C++ extension
            regs = _kernels.registrations()
            for name, capsule in regs.items():
                jax.ffi.register_ffi_target(name, capsule, platform="cpu")
            _state["targets"] = frozenset(regs)
        except Exception as e:  # ImportError (not built), or a registration failure
            _state["reason"] = f"{type(e).__name__}: {e}"
            return
        _state["available"] = True


def kernel_available() -> bool:
    """Whether the fused CPU kernel is built, loaded and not disabled by ``JAXCLP_NO_FFI``."""
    _load()
    return _state["available"]


def kernel_targets() -> frozenset:
    """The XLA FFI custom-call names the fused kernel registered (empty where it is not loaded)."""
    _load()
    return _state["targets"]


def trace_path() -> tuple:
    """What decides, at trace time, which path a sparse product lowers to: the kernel's availability,
    :func:`xla_path`'s override in this thread and ``JAXCLP_GPU_SPMM`` (a key of :mod:`jaxclp.program_store`)."""
    return kernel_available(), bool(getattr(_force, "on", False)), os.environ.get(GPU_SPMM_ENV, "")


def kernel_status() -> str:
    """One line: which paths :mod:`jaxclp.sparse` uses on CPU (and why) and on CUDA."""
    try:
        gpu = f"CUDA: {_gpu_spmm()} ({GPU_SPMM_ENV})"
    except ValueError as e:
        gpu = f"CUDA: {e}"
    if kernel_available():
        return f"fused C++ kernel (XLA FFI, jaxclp._kernels) on CPU; {gpu}; XLA path on other platforms"
    return f"XLA path on CPU ({_state['reason']}); {gpu}; XLA path on other platforms"


@contextlib.contextmanager
def xla_path():
    """Code traced inside this context uses the XLA path even on CPU (already compiled functions keep theirs).

    Example::

        with jaxclp.sparse.xla_path():
            ref = jax.jit(lambda: csr_matmul(...))()   # a fresh function: traced here
    """
    prev = getattr(_force, "on", False)
    _force.on = True
    try:
        yield
    finally:
        _force.on = prev


def _use_kernel() -> bool:
    """Trace-time choice of the CPU path; warns once when the kernel was expected but is missing."""
    if getattr(_force, "on", False):
        return False
    if kernel_available():
        return True
    if not _state["disabled_env"] and not _state["warned"]:
        _state["warned"] = True
        warnings.warn(
            "jaxclp: the fused CPU kernel (extension jaxclp._kernels) is not available "
            f"({_state['reason']}); using XLA's sparse path, which is 2-4x slower on CPU. Reinstall with a C++ "
            f"compiler (`pip install -e .`) to build it, or set {NO_FFI_ENV}=1 to silence this warning.",
            RuntimeWarning, stacklevel=3)
    return False


# ------------------------------------------------------------------------------------------------ the XLA path


def _pad_cols(y):
    k = y.shape[1]
    kp = -(-k // _PAD) * _PAD
    return (jnp.pad(y, ((0, 0), (0, kp - k))) if kp != k else y), k


def _segment_mm(data, indices, rows_of, indptr, y):
    """Gather + sorted ``segment_sum``: XLA:GPU fuses the (m, K) gather into its scatter-add, so the program
    holds no (m, K) buffer (BCSR @ dense does: ~16 bytes per edge at K = 5, ``benchmarks/results/gpu_spmm.md``)."""
    return jax.ops.segment_sum(data[:, None] * y[indices], rows_of, indptr.shape[0] - 1, indices_are_sorted=True)


def _xla_mm(data, indices, rows_of, indptr, y):
    """The XLA path: padded BCSR @ dense for K >= CSR_MIN_COLUMNS, :func:`_segment_mm` otherwise."""
    if y.shape[1] >= CSR_MIN_COLUMNS:
        yp, k = _pad_cols(y)
        mat = jsp.BCSR((data, indices, indptr), shape=(indptr.shape[0] - 1, y.shape[0]), indices_sorted=True)
        return (mat @ yp)[:, :k]
    return _segment_mm(data, indices, rows_of, indptr, y)


def _ffi_mm(data, indices, rows_of, indptr, y):
    out = jax.ShapeDtypeStruct((indptr.shape[0] - 1, y.shape[1]), y.dtype)
    return jax.ffi.ffi_call("jaxclp_csr_mm", out)(data, indices.astype(jnp.int32), indptr.astype(jnp.int32), y)


def _ffi_scaled(data, indices, rows_of, indptr, left, right, x):
    out = jax.ShapeDtypeStruct((indptr.shape[0] - 1, x.shape[1]), x.dtype)
    return jax.ffi.ffi_call("jaxclp_csr_mm_scaled", out)(data, indices.astype(jnp.int32),
                                                         indptr.astype(jnp.int32), x, left, right)


def _scaled_by(mm):
    """The factored step ``left * mm(..., right * x)`` of a product ``mm`` (the paths without a fused kernel)."""
    return lambda data, indices, rows_of, indptr, left, right, x: left * mm(data, indices, rows_of, indptr,
                                                                           right * x)


_xla_scaled = _scaled_by(_xla_mm)


def _ffi_sddmm(indices, rows_of, indptr, g, y):
    out = jax.ShapeDtypeStruct(indices.shape, g.dtype)
    return jax.ffi.ffi_call("jaxclp_csr_sddmm", out, vmap_method="sequential")(
        indices.astype(jnp.int32), indptr.astype(jnp.int32), g, y)


def _xla_sddmm(indices, rows_of, indptr, g, y):
    return jnp.sum(g[rows_of] * y[indices], axis=-1)


def _sddmm(indices, rows_of, indptr, g, y):
    """``out[e] = g[rows_of[e]] . y[indices[e]]`` (m,): the cotangent of a CSR product's values. The kernel
    when it is built and has this target (an extension built before it was added falls back to XLA)."""
    _load()  # idempotent
    if "jaxclp_csr_sddmm" not in _state["targets"]:
        return _xla_sddmm(indices, rows_of, indptr, g, y)
    return _on_platform(_ffi_sddmm, _xla_sddmm, indices, rows_of, indptr, g, y)


GPU_SPMM_PATHS = ("segment", "cusparse", "xla")


def _gpu_spmm() -> str:
    """The CUDA path, read at trace time from ``JAXCLP_GPU_SPMM`` (default ``"segment"``)."""
    v = os.environ.get(GPU_SPMM_ENV, "").strip().lower() or "segment"
    if v not in GPU_SPMM_PATHS:
        raise ValueError(f"{GPU_SPMM_ENV} must be one of {GPU_SPMM_PATHS}; got {v!r}")
    return v


def _cusparse_mm(data, indices, rows_of, indptr, y):
    """cuSPARSE's CSR SpMM through ``jax.experimental.sparse``'s ``csr_matmat`` primitive (which lowers to
    cuSPARSE on CUDA for float32/float64 without any configuration flag; BCSR's product does so only under
    ``jax_bcoo_cusparse_lowering``); other dtypes take the XLA path."""
    from jax.experimental.sparse import csr as jcsr

    dtype = jnp.result_type(data.dtype, y.dtype)
    if dtype not in (jnp.float32, jnp.float64):
        return _xla_mm(data, indices, rows_of, indptr, y)
    return jcsr._csr_matmat(data.astype(dtype), indices.astype(jnp.int32), indptr.astype(jnp.int32),
                            y.astype(dtype), shape=(indptr.shape[0] - 1, y.shape[0]))


_GPU_MM = {"segment": _segment_mm, "cusparse": _cusparse_mm, "xla": _xla_mm}


def _on_platform(ffi_fn, xla_fn, *args, cuda_fn=None):
    """``ffi_fn`` on CPU when the kernel is used, ``cuda_fn`` (if not None) on CUDA, else ``xla_fn``;
    :func:`xla_path` forces ``xla_fn`` on every platform."""
    if getattr(_force, "on", False):
        return xla_fn(*args)
    branches = {}
    if _use_kernel():
        branches["cpu"] = ffi_fn
    if cuda_fn is not None:
        branches["cuda"] = cuda_fn
    if not branches:
        return xla_fn(*args)
    return jax.lax.platform_dependent(*args, default=xla_fn, **branches)


# --------------------------------------------------------------------------------------- batched primitives


def _bcast(axis_size, args, in_batched):
    return tuple(a if b else jnp.broadcast_to(a, (axis_size, *a.shape)) for a, b in zip(args, in_batched))


def _fold(a):
    """(b, n, K) -> (n, b * K): the batch folded into the columns."""
    b, n, k = a.shape
    return jnp.moveaxis(a, 0, 1).reshape(n, b * k)


def _unfold(a, b):
    return jnp.moveaxis(a.reshape(a.shape[0], b, a.shape[1] // b), 1, 0)


@jax.custom_batching.custom_vmap
def _csr_mm(data, indices, rows_of, indptr, y):
    return _on_platform(_ffi_mm, _xla_mm, data, indices, rows_of, indptr, y, cuda_fn=_GPU_MM[_gpu_spmm()])


@_csr_mm.def_vmap
def _csr_mm_vmap(axis_size, in_batched, data, indices, rows_of, indptr, y):
    *mat_b, y_b = in_batched
    if any(mat_b):  # a batch of different matrices: no folding possible, map sequentially
        args = _bcast(axis_size, (data, indices, rows_of, indptr, y), in_batched)
        return jax.lax.map(lambda a: _csr_mm(*a), args), True
    if not y_b:
        return _csr_mm(data, indices, rows_of, indptr, y), False
    return _unfold(_csr_mm(data, indices, rows_of, indptr, _fold(y)), axis_size), True


@jax.custom_batching.custom_vmap
def _scaled_mm(data, indices, rows_of, indptr, left, right, x):
    return _on_platform(_ffi_scaled, _xla_scaled, data, indices, rows_of, indptr, left, right, x,
                        cuda_fn=_scaled_by(_GPU_MM[_gpu_spmm()]))


@_scaled_mm.def_vmap
def _scaled_mm_vmap(axis_size, in_batched, data, indices, rows_of, indptr, left, right, x):
    args = (data, indices, rows_of, indptr, left, right, x)
    if any(in_batched[:4]):
        return jax.lax.map(lambda a: _scaled_mm(*a), _bcast(axis_size, args, in_batched)), True
    if not any(in_batched[4:]):
        return _scaled_mm(*args), False
    left, right, x = (_fold(a) for a in _bcast(axis_size, (left, right, x), in_batched[4:]))
    return _unfold(_scaled_mm(data, indices, rows_of, indptr, left, right, x), axis_size), True


# ------------------------------------------------------------------------------------------------ public API


def host_row_pointers(rows, num_rows: int) -> jax.Array:
    """:func:`row_pointers` computed once on the host (numpy) for concrete, sorted row indices: what graph
    constructors store in ``Graph.indptr``."""
    return jnp.asarray(np.searchsorted(np.asarray(rows), np.arange(num_rows + 1)), dtype=jnp.int32)


def row_pointers(rows: jax.Array, num_rows: int) -> jax.Array:
    """(num_rows + 1,) int32 CSR row pointers of a sorted row-index array."""
    return jnp.searchsorted(rows, jnp.arange(num_rows + 1, dtype=rows.dtype)).astype(jnp.int32)


def _transpose_mm(values, senders, receivers, num_cols, g):
    """``Ahat.T @ g`` through the CSR of the transpose (edges sorted by sender), built here."""
    order = jnp.argsort(senders, stable=True)  # (sender, receiver) order: the transpose's CSR
    s = senders[order]
    return _csr_mm(values[order], receivers[order], s, row_pointers(s, num_cols), g)


def _zero(a):
    return np.zeros(a.shape, jax.dtypes.float0)  # cotangent of an integer input


@jax.custom_vjp
def csr_matmul(values, senders, receivers, indptr, y):
    """``out[r] = sum_{e: s->r} values[e] * y[s]``.

    Args:
        values: (m,) float edge values (same dtype as ``y``).
        senders: (m,) int32 column indices.
        receivers: (m,) int32 row indices, sorted ascending, senders sorted within each row.
        indptr: (n + 1,) int32 row pointers of ``receivers`` (:func:`row_pointers`).
        y: (n, K) dense block, any K >= 1.

    Returns:
        (n, K).
    """
    return _csr_mm(values, senders, receivers, indptr, y)


def _fwd(values, senders, receivers, indptr, y):
    return _csr_mm(values, senders, receivers, indptr, y), (values, senders, receivers, indptr, y)


def _bwd(res, g):
    values, senders, receivers, indptr, y = res
    g_y = _transpose_mm(values, senders, receivers, y.shape[0], g)
    g_values = _sddmm(senders, receivers, indptr, g.astype(y.dtype), y).astype(values.dtype)
    return g_values, _zero(senders), _zero(receivers), _zero(indptr), g_y


csr_matmul.defvjp(_fwd, _bwd)


@jax.custom_vjp
def csr_matmul_symmetric(values, senders, receivers, indptr, y):
    """:func:`csr_matmul` for a SYMMETRIC matrix: ``values`` of the edge s -> r equals that of r -> s.

    Then ``A.T = A``, so the gradient's transposed product runs on the same CSR: no per-call sort of the
    senders (which :func:`csr_matmul`'s backward pass needs, and which XLA even constant-folds at compile time
    when the graph is a jit constant: minutes for millions of edges). The caller guarantees the symmetry
    (e.g. a :class:`jaxclp.graph.Graph` with ``symmetric=True`` under a symmetric normalization); it is not
    checked here. Arguments as :func:`csr_matmul`.
    """
    return _csr_mm(values, senders, receivers, indptr, y)


def _sym_bwd(res, g):
    values, senders, receivers, indptr, y = res
    g_y = _csr_mm(values, senders, receivers, indptr, g)  # A.T g = A g
    g_values = _sddmm(senders, receivers, indptr, g.astype(y.dtype), y).astype(values.dtype)
    return g_values, _zero(senders), _zero(receivers), _zero(indptr), g_y


csr_matmul_symmetric.defvjp(_fwd, _sym_bwd)


class TransposePlan(NamedTuple):
    """The CSR of ``A`` and of its transpose for a receiver-sorted edge list (:func:`transpose_plan`).

    Attributes:
        indptr: (n + 1,) int32 row pointers of the receivers (the CSR of ``A``).
        order: (m,) int32 edge permutation that sorts the edges by sender (stable: receivers ascending within
            each sender), i.e. the CSR of ``A.T``.
        t_indptr: (n + 1,) int32 row pointers of ``senders[order]``.
    """

    indptr: jax.Array
    order: jax.Array
    t_indptr: jax.Array


def transpose_plan(senders: jax.Array, receivers: jax.Array, num_nodes: int) -> TransposePlan:
    """Builds the :class:`TransposePlan` of a receiver-sorted edge list once (one sort of the senders), so that
    the gradient of :func:`csr_matmul_planned` needs no sort per call. Jittable."""
    order = jnp.argsort(senders, stable=True).astype(jnp.int32)
    return TransposePlan(row_pointers(receivers, num_nodes), order, row_pointers(senders[order], num_nodes))


@jax.custom_vjp
def csr_matmul_planned(values, senders, receivers, plan, y):
    """:func:`csr_matmul` for any (non-symmetric) matrix with its transpose precomputed in ``plan``.

    The forward product and the gradient's transposed product both run the CSR kernel; the cotangent of
    ``values`` is ``sum_k g[r_e, k] * y[s_e, k]`` (so edge values computed by a model, e.g. attention
    weights, are trained through it). Built for message passing inside a training loop: the plan is made once
    per fit (:func:`transpose_plan`) instead of one sort per backward pass.

    Args:
        values: (m,) float edge values (same dtype as ``y``).
        senders: (m,) int32 column indices.
        receivers: (m,) int32 row indices, sorted ascending.
        plan: :func:`transpose_plan` of ``senders``/``receivers``.
        y: (n, K) dense block.

    Returns:
        (n, K).
    """
    return _csr_mm(values, senders, receivers, plan.indptr, y)


def _pfwd(values, senders, receivers, plan, y):
    return _csr_mm(values, senders, receivers, plan.indptr, y), (values, senders, receivers, plan, y)


def _pbwd(res, g):
    values, senders, receivers, plan, y = res
    o = plan.order
    g_y = _csr_mm(values[o], receivers[o], senders[o], plan.t_indptr, g)
    g_values = _sddmm(senders, receivers, plan.indptr, g.astype(y.dtype), y).astype(values.dtype)
    return (g_values, _zero(senders), _zero(receivers), TransposePlan(*(_zero(a) for a in plan)), g_y)


csr_matmul_planned.defvjp(_pfwd, _pbwd)


def factored_matmul(values, senders, receivers, indptr, left, right, x):
    """The factored CLP step ``out = left * (Ahat @ (right * x))`` in one pass over the CSR.

    ``Ahat[r, s] = sum of values[e] over the edges s -> r``. On CPU with the kernel built this is one fused
    operation; otherwise it is exactly ``left * csr_matmul(values, ..., right * x)`` on the XLA path.

    Args:
        values: (m,) float edge values (same dtype as ``x``).
        senders: (m,) int32 column indices.
        receivers: (m,) int32 row indices, sorted ascending, senders sorted within each row.
        indptr: (n + 1,) int32 row pointers of ``receivers``.
        left: (n, K) row scaling.
        right: (n, K) column scaling.
        x: (n, K) dense block, any K >= 1.

    Returns:
        (n, K) in the common dtype of the float inputs.

    Raises:
        ValueError: naming the argument whose shape does not fit.
    """
    if x.ndim != 2:
        raise ValueError(f"x must be (n, K), got shape {x.shape}")
    n, k = indptr.shape[0] - 1, x.shape[1]
    for name, a, shape in (("values", values, senders.shape), ("receivers", receivers, senders.shape),
                           ("left", left, (n, k)), ("right", right, x.shape)):
        if a.shape != shape:
            raise ValueError(f"{name} must have shape {shape}, got {a.shape}")
    dtype = jnp.result_type(values.dtype, left.dtype, right.dtype, x.dtype)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise ValueError(f"values, left, right and x must be floating point, got {dtype}")
    return _factored(values.astype(dtype), senders, receivers, indptr, left.astype(dtype), right.astype(dtype),
                     x.astype(dtype))


@jax.custom_vjp
def _factored(values, senders, receivers, indptr, left, right, x):
    return _scaled_mm(values, senders, receivers, indptr, left, right, x)


def _ffwd(values, senders, receivers, indptr, left, right, x):
    out = _scaled_mm(values, senders, receivers, indptr, left, right, x)
    return out, (values, senders, receivers, indptr, left, right, x)


def _fbwd(res, g):
    values, senders, receivers, indptr, left, right, x = res
    h = left * g
    z = right * x
    g_left = g * _csr_mm(values, senders, receivers, indptr, z)  # recomputed: the forward keeps no intermediate
    t = _transpose_mm(values, senders, receivers, x.shape[0], h)
    g_values = _sddmm(senders, receivers, indptr, h, z).astype(values.dtype)
    return g_values, _zero(senders), _zero(receivers), _zero(indptr), g_left, x * t, right * t


_factored.defvjp(_ffwd, _fbwd)
