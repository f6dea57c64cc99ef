"""``jaxclp.CLP``: a fit/predict estimator for library users."""

from __future__ import annotations

import itertools
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxclp import _checks
from jaxclp.clp import DEFAULT_ALPHAS, CLPResult, clp_beliefs
from jaxclp.compat import initial_beliefs
from jaxclp.graph import Graph
from jaxclp.metrics import evaluate
from jaxclp.operator import spectral_radius
from jaxclp.mlp import fit_mlp
from jaxclp.train import TrainConfig


def _as_list(x) -> list:
    return list(x) if isinstance(x, (list, tuple)) else [x]


class CLP:
    """Compatible Label Propagation with an MLP base predictor; every choice is made on validation.

    Example::

        model = jaxclp.CLP(hidden=(64,)).fit(graph, features, labels, train_mask, val_mask)
        pred = model.predict()            # (n,) classes
        model.alpha_, model.H_, model.spectral_.rho

    Args:
        hidden: hidden widths of the MLP (``()`` is linear).
        dropout, lr, weight_decay, epochs, patience, optimizer: MLP training (paper defaults).
        alphas: grid of alphas; the closed form is solved for all of them at once.
        normalization: "sym", "row", "none", or a list of them to select from on validation.
        l1_normalize: bool, or a list (e.g. ``[False, True]``) to select from.
        prior_source: "mlp", "b0", or a list to select from.
        num_iters: steps of the iterative (L1) variant.
        method: closed-form solver ("auto" by default).
        metric: "accuracy" or "roc_auc" for validation selection.
        seed: PRNG seed for the MLP (or pass ``key`` to :meth:`fit`).
        num_classes: K; inferred as ``max(train/val labels) + 1`` when None (pass it to have out-of-range
            labels rejected).

    Attributes (after fit):
        alpha_, normalization_, l1_normalize_, prior_source_: the selected configuration.
        H_: (K, K) compatibility; spectral_: per-class :class:`jaxclp.SpectralInfo`; sinkhorn_: its info.
        mlp_: :class:`jaxclp.mlp.MLPResult` (prior_, params, training info).
        val_scores_: dict mapping (normalization, l1, prior_source, alpha) -> validation score.
        beliefs_: (n, K) propagated beliefs of the selected configuration.
    """

    def __init__(self, *, hidden: Sequence[int] = (64,), dropout: float = 0.5, lr: float = 0.01,
                 weight_decay: float = 5e-5, epochs: int = 500, patience: int = 50, optimizer: str = "adam",
                 alphas=DEFAULT_ALPHAS, normalization="sym", l1_normalize=False, prior_source="mlp",
                 num_iters: int = 50, method: str = "auto", metric: str = "accuracy", seed: int = 0,
                 num_classes: int | None = None):
        self.hidden = tuple(hidden)
        self.dropout = dropout
        self.cfg = TrainConfig(lr=lr, weight_decay=weight_decay, epochs=epochs, patience=patience,
                               optimizer=optimizer)
        self.alphas = tuple(float(a) for a in alphas)
        _checks.alpha(np.asarray(self.alphas), "alphas")
        self.normalization = normalization
        self.l1_normalize = l1_normalize
        self.prior_source = prior_source
        self.num_iters = num_iters
        self.method = method
        self.metric = metric
        self.seed = seed
        self.num_classes = num_classes

    def fit(self, graph: Graph, features, labels, train_mask, val_mask, *, key=None, prior=None) -> "CLP":
        """Trains the MLP, estimates H and selects alpha and the variant on validation.

        Args:
            graph: the graph (n nodes).
            features: (n, d) node features, or None when ``prior`` is given.
            labels: (n,) int labels; only ``train_mask | val_mask`` entries are read (others may be -1).
            train_mask, val_mask: (n,) bool, disjoint; train nonempty, val nonempty.
            key: PRNG key (default ``jax.random.key(seed)``).
            prior: optional (n, K) precomputed prior (skips the MLP).

        Returns:
            self.
        """
        n = graph.num_nodes
        _checks.mask("train_mask", train_mask, n)
        _checks.mask("val_mask", val_mask, n)
        tm, vm = np.asarray(train_mask), np.asarray(val_mask)
        if np.any(tm & vm):
            raise ValueError("train_mask and val_mask overlap")
        y = np.asarray(labels)
        _checks.shape("labels", y, (n,))
        seen = tm | vm
        y = np.where(seen, y, 0)  # labels outside train/val are never read
        k = _checks.labels(y, n, self.num_classes)
        self.num_classes_ = k
        y = jnp.asarray(y, jnp.int32)
        if prior is None:
            if features is None:
                raise ValueError("features is None: pass features or a precomputed prior")
            key = jax.random.key(self.seed) if key is None else key
            self.mlp_ = fit_mlp(key, jnp.asarray(features), y, jnp.asarray(tm), jnp.asarray(vm),
                                num_classes=k, hidden=self.hidden, dropout=self.dropout, cfg=self.cfg)
            prior = self.mlp_.prior
        else:
            _checks.probabilities("prior", prior, n, k)
            self.mlp_ = None
        self.prior_ = jnp.asarray(prior)
        best = None
        self.val_scores_ = {}
        for norm, l1, src in itertools.product(_as_list(self.normalization), _as_list(self.l1_normalize),
                                               _as_list(self.prior_source)):
            res: CLPResult = clp_beliefs(graph, self.prior_, y, jnp.asarray(tm), alphas=self.alphas,
                                         normalization=norm, l1_normalize=l1, prior_source=src,
                                         num_iters=self.num_iters, method=self.method, spectrum=False)
            scores = jax.vmap(lambda b: evaluate(self.metric, b, y, jnp.asarray(vm)))(res.beliefs)
            scores = np.where(res.valid, np.asarray(scores), -np.inf)
            for a, s in zip(self.alphas, scores):
                self.val_scores_[(norm, l1, src, a)] = float(s)
            i = int(np.argmax(scores))
            if best is None or scores[i] > best[0]:
                best = (scores[i], norm, l1, src, i, res)
        score, self.normalization_, self.l1_normalize_, self.prior_source_, i, res = best
        if not np.isfinite(score):
            raise ValueError("no alpha in the grid gives a convergent propagation (alpha * rho >= 1 for all)")
        self.alpha_ = self.alphas[i]
        self.val_score_ = float(score)
        self.H_, self.sinkhorn_, self._spectral = res.H, res.sinkhorn, res.spectral
        self._graph, self._train, self._labels = graph, jnp.asarray(tm), y
        self.method_ = res.method
        self.beliefs_ = res.beliefs[i]
        return self

    @property
    def spectral_(self):
        """Per-class :class:`jaxclp.SpectralInfo` of the selected operators, computed on first access.

        A power iteration; when the a-priori bound already proves convergence, :meth:`fit` does not need it,
        and computing it there cost several times the propagation itself (``benchmarks/results/fixes.md``).
        """
        self._check_fitted()
        if self._spectral is None:
            b0 = initial_beliefs(self.prior_, self._labels, self._train)  # as clp_beliefs builds it
            self._spectral = spectral_radius(self._graph, b0, self.H_, normalization=self.normalization_)
        return self._spectral

    def _check_fitted(self):
        if not hasattr(self, "beliefs_"):
            raise RuntimeError("call fit() first")

    def predict_proba(self) -> jax.Array:
        """(n, K) beliefs of the selected configuration, rows normalized to sum to 1."""
        self._check_fitted()
        s = self.beliefs_.sum(axis=1, keepdims=True)
        return jnp.where(s > 0, self.beliefs_ / jnp.where(s > 0, s, 1.0), 1.0 / self.num_classes_)

    def predict(self) -> jax.Array:
        """(n,) predicted classes."""
        return jnp.argmax(self.predict_proba(), axis=1)
