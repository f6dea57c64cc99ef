"""Eager input validation: clear ``ValueError`` before any compile.

Every check is skipped for traced values (inside a user's ``jax.jit``), where values are unknown; the
public functions validate shapes (always static) and, for concrete arrays, values.
"""

from __future__ import annotations

import jax
import numpy as np

from jaxclp.features import SparseFeatures


def is_concrete(*xs) -> bool:
    return not any(isinstance(x, jax.core.Tracer) for x in xs)


def device_array(x, dtype) -> jax.Array:
    """``jnp.asarray(x, dtype)``; a host value (a float, a numpy array) is cast on the host and put on the device
    (an eager ``jnp.asarray`` of a numpy array compiles a program per shape)."""
    if isinstance(x, (jax.Array, jax.core.Tracer)):
        return jax.numpy.asarray(x, dtype=dtype)
    return jax.device_put(np.asarray(x, dtype=jax.dtypes.canonicalize_dtype(dtype)))


def finite(name: str, x) -> None:
    if is_concrete(x) and not bool(np.all(np.isfinite(np.asarray(x)))):
        bad = int(np.size(x) - np.count_nonzero(np.isfinite(np.asarray(x))))
        raise ValueError(f"{name} contains {bad} NaN/inf value(s)")


def nonnegative(name: str, x) -> None:
    if is_concrete(x) and bool(np.any(np.asarray(x) < 0)):
        raise ValueError(f"{name} must be nonnegative; min is {float(np.min(np.asarray(x)))}")


def floating(name: str, x) -> None:
    """``x`` must have a floating-point dtype (integer beliefs would silently turn alpha into 0 or 1)."""
    dt = getattr(x, "dtype", None)
    dt = np.asarray(x).dtype if dt is None else np.dtype(dt)
    if not np.issubdtype(dt, np.floating):
        raise ValueError(f"{name} must be a floating-point array; got dtype {dt} "
                         f"(cast it, e.g. {name}.astype(float))")


def integer_labels(name: str, y) -> np.ndarray:
    """``y`` as a numpy integer array, or ValueError naming ``name`` (strings, floats, bools, objects)."""
    arr = np.asarray(y)
    if not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name} must be integers (class ids; -1 for unlabelled); got dtype {arr.dtype}")
    return arr


def num_classes(k) -> None:
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or int(k) < 2:
        raise ValueError(f"num_classes must be an integer >= 2; got {k!r}")


def masked_labels(y, num_nodes: int, k: int, train_mask, val_mask=None, *, name: str = "labels") -> None:
    """Integer labels (n,) whose ``train_mask | val_mask`` entries lie in [0, k) (others are never read)."""
    shape(name, y, (num_nodes,))
    if not is_concrete(y, train_mask, val_mask):
        return
    arr = integer_labels(name, y)
    for mname, m in (("train_mask", train_mask), ("val_mask", val_mask)):
        if m is None:
            continue
        sel = arr[np.asarray(m, bool)]
        bad = (sel < 0) | (sel >= k)
        if bad.any():
            nodes = np.flatnonzero(np.asarray(m, bool))[bad]
            raise ValueError(f"{name} on {mname} nodes must lie in [0, K) with K = {k} classes; got "
                             f"{sel[bad][:5].tolist()} at node(s) {nodes[:5].tolist()}"
                             + (f" and {bad.sum() - 5} more" if bad.sum() > 5 else ""))


def features(x, num_nodes: int | None = None, name: str = "features") -> None:
    """(n, d) dense or :class:`jaxclp.features.SparseFeatures`, finite values (checked when concrete)."""
    if isinstance(x, SparseFeatures):
        if num_nodes is not None and x.shape[0] != num_nodes:
            raise ValueError(f"{name} must have shape ({num_nodes}, ?) (one row per node); got {x.shape}")
        finite(name, x.values)
        return
    shape(name, x, (num_nodes, None))
    finite(name, x)


def prior_rows(name: str, p, atol: float = 1e-4) -> None:
    """Rows of a prior (class distributions) must sum to 1 within ``atol``; refused otherwise (no rescaling)."""
    if not is_concrete(p):
        return
    sums = np.asarray(p).sum(axis=1)
    bad = np.abs(sums - 1) > atol
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name} rows must sum to 1 (a class distribution per node); {int(bad.sum())} row(s) "
                         f"do not, e.g. row {i} sums to {float(sums[i]):.6g}. Normalize it first: "
                         f"{name} / {name}.sum(axis=1, keepdims=True)")


def shape(name: str, x, expected: tuple) -> None:
    """Checks ``x.shape`` against ``expected`` where ``None`` entries match anything."""
    s = tuple(np.shape(x))
    if len(s) != len(expected) or any(e is not None and e != a for a, e in zip(s, expected)):
        exp = "(" + ", ".join("?" if e is None else str(e) for e in expected) + ")"
        raise ValueError(f"{name} must have shape {exp}; got {s}")


def alpha(a, name: str = "alpha") -> None:
    if is_concrete(a):
        arr = np.asarray(a)
        if not np.all(np.isfinite(arr)) or np.any(arr <= 0) or np.any(arr >= 1):
            raise ValueError(f"{name} must lie in the open interval (0, 1); got {arr.tolist()}")


def labels(y, num_nodes: int, num_classes: int | None = None) -> int:
    """Validates integer labels (n,) in [0, K); returns K (inferred as max + 1 when not given)."""
    shape("labels", y, (num_nodes,))
    if not is_concrete(y):
        if num_classes is None:
            raise ValueError("num_classes must be given when labels are traced")
        return int(num_classes)
    arr = np.asarray(y)
    if not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"labels must be integers; got dtype {arr.dtype}")
    k = int(arr.max()) + 1 if num_classes is None else int(num_classes)
    if k < 2:
        raise ValueError(f"need at least K = 2 classes; got K = {k}")
    if arr.min() < 0 or arr.max() >= k:
        raise ValueError(f"labels must lie in [0, {k}); got range [{arr.min()}, {arr.max()}]")
    return k


def mask(name: str, m, num_nodes: int, nonempty: bool = True) -> None:
    shape(name, m, (num_nodes,))
    if is_concrete(m):
        arr = np.asarray(m)
        if arr.dtype != np.bool_:
            raise ValueError(f"{name} must be a boolean mask; got dtype {arr.dtype}")
        if nonempty and not arr.any():
            raise ValueError(f"{name} is empty: it selects no node")


def probabilities(name: str, p, num_nodes: int | None = None, num_classes: int | None = None) -> None:
    """(n, K) nonnegative finite rows (not required to sum to one)."""
    shape(name, p, (num_nodes, num_classes))
    finite(name, p)
    nonnegative(name, p)


def clp_inputs(num_nodes: int, b0, H, prior) -> int:
    """Validates the (b0, H, prior) triple of propagate/solve; returns K."""
    shape("b0", b0, (num_nodes, None))
    k = int(np.shape(b0)[1])
    shape("prior", prior, (num_nodes, k))
    shape("H", H, (k, k))
    floating("b0", b0)
    floating("prior", prior)
    probabilities("b0", b0)
    probabilities("prior", prior)
    finite("H", H)
    return k
