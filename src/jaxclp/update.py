"""Warm updates of CLP's closed form after new or corrected labels.

When labels arrive after a fit, the base predictor (the prior D) stays; what changes is the start
``B0 = M*Y + (1-M)*D`` (the new labelled rows are their one-hot labels), hence the edge weights ``F`` (the
operator ``A^F_k = diag(B0[:, k]) Ahat diag((B0 H)[:, k])``), the propagated start (``B0`` itself with
``prior_source="b0"``) and, only if asked, the compatibility H. The closed form

    (I - a A^F_k) x_k = (1 - a) D_k

is then solved again with the same solver and alpha, starting from the previous solution (``x0``, a warm start:
:func:`jaxclp.solve.solve`), which is close when few labels changed. The convergence test is the cold solve's
(relative to ``||(1 - a) D_k||``), so the value equals a cold solve of the same system to the solver's tolerance;
only the iteration count changes. "dense" (a direct solve) has nothing to warm-start and solves afresh.

:meth:`jaxclp.CLP.update` is the estimator's method; :func:`update_beliefs` the function behind it. Not covered:
new edges or nodes (refit), and the per-step L1 and nonlinear (authors') variants (not closed forms).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxclp import _checks
from jaxclp.clp import PriorSource, check_variant, valid_operator
from jaxclp.compatibility import estimate_compatibility, initial_beliefs, masked_labels
from jaxclp.graph import Graph, Normalization
from jaxclp.operator import clp_operator
from jaxclp.sinkhorn import SinkhornInfo
from jaxclp.solve import Method, Solution, solve_operator


class UpdateResult(NamedTuple):
    """The closed form after new labels (:func:`update_beliefs`, :meth:`jaxclp.CLP.update`).

    Attributes:
        beliefs: (n, K) the new closed-form beliefs (user's node order).
        H: (K, K) the compatibility used (the given one, or the re-estimate).
        sinkhorn: the re-estimate's :class:`jaxclp.SinkhornInfo`; None where H was kept.
        warm: :class:`jaxclp.solve.Solution` of the warm-started solve (``value`` = ``beliefs``, user order;
            ``iterations``, ``converged``, ``relative_residual`` per class); None where nothing was solved
            (``method`` "identity").
        cold: the same system solved from the method's own start, when asked (``cold=True``: to compare
            iterations and values); else None.
        train_mask: (n,) bool, the labelled nodes of the update.
        alpha: the alpha solved.
        method: the solver ("identity" where the model is its prior alone).
    """

    beliefs: jax.Array
    H: jax.Array
    sinkhorn: SinkhornInfo | None
    warm: Solution | None
    cold: Solution | None
    train_mask: jax.Array
    alpha: float
    method: str

    @property
    def iterations(self) -> tuple[np.ndarray, np.ndarray | None]:
        """``(warm, cold)`` iterations per class ((K,) int arrays; ``cold`` None unless asked, -1 where the
        method does not count, "gmres")."""
        warm = None if self.warm is None else np.asarray(self.warm.iterations)
        return warm, (None if self.cold is None else np.asarray(self.cold.iterations))


def update_beliefs(graph: Graph, prior, labels, train_mask, H, alpha: float, previous, *,
                   normalization: Normalization = "sym", prior_source: PriorSource = "mlp",
                   spectral_scale: bool = False, reestimate_compatibility: bool = False, method: Method = "auto",
                   tol: float = 1e-6, max_iters: int = 10_000, cold: bool = False) -> UpdateResult:
    """CLP's closed form for new labels, warm-started from the previous solution (module docstring).

    Args:
        graph: the graph (any graph of the protocol, e.g. a :class:`jaxclp.ShardedGraph`).
        prior: (n, K) the fitted prior D (row-stochastic), kept as it is.
        labels: (n,) int class indices 0..K-1; only ``train_mask`` entries are read.
        train_mask: (n,) bool, the labelled nodes after the update (nonempty).
        H: (K, K) the compatibility to keep (ignored with ``reestimate_compatibility``).
        alpha: the alpha of the closed form, in (0, 1).
        previous: (n, K) the previous solution (e.g. the fitted ``beliefs_``), the warm start.
        normalization, prior_source, spectral_scale: the variant (:func:`jaxclp.clp_beliefs`); with
            ``spectral_scale`` the new operators are divided by their own spectral radii, as a fit would.
        reestimate_compatibility: re-estimate H from the new labels (:func:`jaxclp.estimate_compatibility`, as
            a fit does); False (default) keeps ``H``.
        method: the solver ("auto": :func:`jaxclp.solve.choose_method` on the new operator; pass the fit's to
            keep it).
        tol, max_iters: the solver's tolerance and iteration cap.
        cold: also solve the same system from the method's own start (``UpdateResult.cold``), to compare.

    Returns:
        :class:`UpdateResult`.

    Raises:
        ValueError: bad arrays (named), alpha outside (0, 1), an unknown variant, or ``alpha * rho >= 1`` for the
            new operators (normalization "none").
    """
    check_variant(normalization, prior_source, "sinkhorn", False, spectral_scale)
    prior, labels, train_mask = jnp.asarray(prior), jnp.asarray(labels), jnp.asarray(train_mask)
    n = graph.num_nodes
    _checks.shape("prior", prior, (n, None))
    _checks.floating("prior", prior)
    k = prior.shape[1]
    _checks.mask("train_mask", train_mask, n)
    _checks.shape("labels", labels, (n,))
    previous = jnp.asarray(previous)
    _checks.shape("previous", previous, (n, k))
    a = float(alpha)
    if not (np.isfinite(a) and 0.0 < a < 1.0):
        raise ValueError(f"alpha must lie in (0, 1); got {alpha!r}")
    labels = masked_labels(labels, train_mask)
    sk = None
    if reestimate_compatibility:
        H, sk = estimate_compatibility(graph, prior, labels, train_mask)
    H = jnp.asarray(H, prior.dtype)
    _checks.shape("H", H, (k, k))
    b0 = initial_beliefs(prior, labels, train_mask)
    op = clp_operator(graph, b0, H, normalization=normalization)
    d = graph.to_internal(prior) if prior_source == "mlp" else op.left
    op, ok, bound = valid_operator(op, np.asarray([a], prior.dtype), normalization, spectral_scale)
    if not ok[0]:
        raise ValueError(f"alpha * rho >= 1 for the updated operators (alpha = {a:g}, rho <= {bound:.6g}): the "
                         "propagation diverges; refit, or use normalization 'sym' or 'row'")
    x0 = graph.to_internal(previous.astype(d.dtype))
    kw = dict(alpha=a, method=method, tol=tol, max_iters=max_iters, normalization=normalization)
    warm = solve_operator(op, d, x0=x0, **kw)
    warm = warm._replace(value=graph.from_internal(warm.value))
    ref = None
    if cold:
        ref = solve_operator(op, d, **(kw | {"method": warm.method}))
        ref = ref._replace(value=graph.from_internal(ref.value))
    return UpdateResult(warm.value, H, sk, warm, ref, train_mask, a, warm.method)
