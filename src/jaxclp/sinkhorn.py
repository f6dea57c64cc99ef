"""Log-domain Sinkhorn scaling of a nonnegative square matrix to a doubly-stochastic one."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import logsumexp

from jaxclp import _checks


class SinkhornInfo(NamedTuple):
    """Diagnostics of :func:`sinkhorn`.

    Attributes:
        converged: () bool, ``error <= tol``.
        iterations: () int32, number of (row, column) scaling sweeps.
        error: () float, max over rows of |row sum - 1| after the last column scaling (column sums are then
            exact up to rounding).
    """

    converged: jax.Array
    iterations: jax.Array
    error: jax.Array


def sinkhorn(
    C: jax.Array,
    *,
    tol: float = 1e-6,
    max_iters: int = 100_000,
    smoothing: float = 1e-6,
) -> tuple[jax.Array, SinkhornInfo]:
    """Scales a nonnegative (K, K) matrix to a doubly-stochastic one, ``diag(u) C diag(v)``.

    Runs in the log domain inside a ``lax.while_loop`` (jit-able, no host round-trip). To make a scaling
    exist for every input, a zero row or column (a class with no training node, or with no neighbour mass)
    is handled by epsilon smoothing: ``C + smoothing * max(mean(C), tiny)`` is scaled, so the result always
    has strictly positive entries and never contains NaN. With ``smoothing=0`` the input must have total
    support (e.g. strictly positive).

    Args:
        C: (K, K) nonnegative, finite matrix.
        tol: stop when ``max |row sums - 1| <= tol``.
        max_iters: maximal number of sweeps. Inputs close to having no total support (zero rows/columns
            after the tiny smoothing, or entries spanning 1e-30..1e30) need thousands of sweeps; each sweep
            is O(K^2) and the loop exits as soon as ``tol`` is met, so the cap is generous.
        smoothing: relative epsilon added to every entry (documented above).

    Returns:
        ``(P, info)``: P (K, K) doubly-stochastic, and a :class:`SinkhornInfo`.

    Raises:
        ValueError: (eagerly, for concrete input) if C is not square, has negative or non-finite entries.
    """
    C = jnp.asarray(C)
    if C.ndim != 2 or C.shape[0] != C.shape[1]:
        raise ValueError(f"sinkhorn: C must be a square (K, K) matrix; got shape {C.shape}")
    if not jnp.issubdtype(C.dtype, jnp.floating):
        C = C.astype(jnp.float32)
    _checks.finite("C", C)
    _checks.nonnegative("C", C)
    return _sinkhorn(C, tol, max_iters, smoothing)


@jax.jit
def _sinkhorn(C, tol, max_iters, smoothing):
    tiny = jnp.finfo(C.dtype).tiny
    scale = jnp.maximum(jnp.mean(C), tiny)
    Cs = C / scale + smoothing  # scale-invariant smoothing; P is invariant to the global scale
    logC = jnp.where(Cs > 0, jnp.log(jnp.where(Cs > 0, Cs, 1.0)), -jnp.inf)
    K = C.shape[0]
    f0 = jnp.zeros((K,), C.dtype)
    g0 = jnp.zeros((K,), C.dtype)

    def sweep(f, g):
        f = -logsumexp(logC + g[None, :], axis=1)
        g = -logsumexp(logC + f[:, None], axis=0)
        return f, g

    def err(f, g):
        P = jnp.exp(logC + f[:, None] + g[None, :])
        return jnp.max(jnp.abs(P.sum(axis=1) - 1.0))

    def cond(state):
        _, _, it, e = state
        return (it < max_iters) & (e > tol)

    def body(state):
        f, g, it, _ = state
        f, g = sweep(f, g)
        return f, g, it + 1, err(f, g)

    f, g, it, e = jax.lax.while_loop(cond, body, (f0, g0, jnp.int32(0), jnp.asarray(jnp.inf, C.dtype)))
    P = jnp.exp(logC + f[:, None] + g[None, :])
    return P, SinkhornInfo(converged=e <= tol, iterations=it, error=e)
