"""Priors: the base predictor of CLP as a pluggable pipeline stage.

A *prior* is an (n, K) row-stochastic matrix D (one class distribution per node) produced by a predictor
fitted on the training labels, with its epoch chosen by early stopping on the validation nodes only (never
on test labels). CLP then propagates D through the graph (``jaxclp.clp_beliefs``). The paper uses an MLP on
the node features; "any off-the-shelf graph-agnostic model can be plugged in" (Zhong et al. 2022), and a
graph-aware one as well (C&S on top of a GNN, Huang et al. 2021).

Every built-in prior is a pure function with one signature::

    fn(key, graph, features, labels, train_mask, val_mask, num_classes, cfg=TrainConfig(), **options)
        -> PriorResult

Built in (:data:`PRIORS`):

* ``"mlp"``: the paper's MLP on the features (:func:`mlp_prior`, the default of :class:`jaxclp.CLP`).
* ``"link"``: LINK, logistic regression on the adjacency rows (:func:`link_prior`; features unused).
* ``"linkx"``: LINKX (Lim et al. 2021), an MLP on separate embeddings of the adjacency rows and the
  features (:func:`linkx_prior`, :class:`LINKX`).
* ``"gcn"``, ``"h2gcn"``, ``"sage"``, ``"gat"``: the library's GNNs at fixed settings (:func:`gnn_prior`; dense
  or sparse features).
* ``"gcn_tuned"``, ``"sage_tuned"``, ``"gat_tuned"``: the tuned GNNs of Platonov et al. (2023) / Luo et al.
  (2024), their depth and residual blocks chosen on validation among :func:`jaxclp.gnn.tuned_grid`'s 8 specs
  (:func:`tuned_gnn_prior`): the strongest structure-aware baselines of our tables, as priors.

:func:`fit_prior` dispatches a name, a precomputed (n, K) array (validated, never rescaled), a fitted
object with ``predict_proba`` (called on the node features) or a callable with the signature above.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxclp import _checks, buckets, gnn
from jaxclp.baselines import fit_link
from jaxclp.compatibility import masked_labels
from jaxclp.features import SparseFeatures, as_features
from jaxclp.gnn import HALVING_MIN_VAL, HALVING_RUNGS
from jaxclp.sparse import TransposePlan
from jaxclp.graph import Graph
from jaxclp.metrics import evaluate
from jaxclp.mlp import SparseDense, mlp_build
from jaxclp.train import TrainConfig, TrainInfo, fit_to_deadline, stopped_at

PRIOR_ROW_ATOL = 1e-4
"""Tolerance on the row sums of a user-given prior (float32 softmax rows sum to 1 within ~1e-7)."""


class PriorResult(NamedTuple):
    """A fitted prior and its diagnostics.

    Attributes:
        prior: (n, K) row-stochastic class distributions D (columns in class order 0..K-1).
        name: the predictor: a :data:`PRIORS` key, ``"array"``, ``"predict_proba"`` or a callable's name.
        val_score: validation ``cfg.metric`` of ``prior`` (accuracy or ROC-AUC; NaN without validation
            nodes); computed from ``prior`` itself for every kind of prior.
        best_epoch: 0-based epoch of the selected parameters (-1: the initial ones), or None where the
            predictor was not trained here (array, ``predict_proba``) or does not report it (LINK).
        info: :class:`jaxclp.train.TrainInfo` of the training run, or None.
        params: the selected parameters (a pytree), or None.
        choice: what validation chose among the predictor's own candidates (a tuned GNN's
            :class:`jaxclp.gnn.GNNSpec`), or None where it has none.
        stopped_at: the epoch at which a ``deadline`` stopped the training (the predictors of
            :data:`DEADLINE_PRIORS`), or None where training ran to its end (or its early stop).
    """

    prior: jax.Array
    name: str
    val_score: float
    best_epoch: int | None = None
    info: TrainInfo | None = None
    params: Any = None
    choice: Any = None
    stopped_at: int | None = None


def _score(metric: str, prior, labels, val_mask) -> float:
    if not bool(np.any(np.asarray(val_mask))):
        return float("nan")
    vm = np.asarray(val_mask)
    return float(evaluate(metric, jax.device_put(prior), masked_labels(labels, vm), jax.device_put(vm)))


def _trained(name: str, prior, params, info: TrainInfo, labels, val_mask, cfg: TrainConfig,
             deadline: float | None = None) -> PriorResult:
    return PriorResult(prior=prior, name=name, val_score=_score(cfg.metric, prior, labels, val_mask),
                       best_epoch=int(info.best_epoch), info=info, params=params,
                       stopped_at=None if deadline is None else stopped_at(info, cfg))


def _check_common(graph, labels, train_mask, val_mask, num_classes) -> int:
    if not isinstance(graph, Graph):
        raise ValueError(f"graph must be a jaxclp Graph; got {type(graph).__name__}")
    n = graph.num_nodes
    _checks.mask("train_mask", train_mask, n)
    _checks.mask("val_mask", val_mask, n, nonempty=False)
    _checks.num_classes(num_classes)
    _checks.masked_labels(labels, n, int(num_classes), train_mask, val_mask)
    return n


def _gnn_features(features, n: int, who: str):
    """Float32 features for a GNN prior: a dense array, or :class:`SparseFeatures` for sparse input (the GNNs'
    first layer is a sparse product; never densified)."""
    if features is None:
        raise ValueError(f"features is None: the {who} prior needs node features")
    x = as_features(features, jnp.float32)
    _checks.features(x, n)
    return x


# ----------------------------------------------------------------------------------------------- MLP
def mlp_prior(key: jax.Array, graph: Graph, features, labels, train_mask, val_mask, num_classes: int,
              cfg: TrainConfig = TrainConfig(), *, hidden: Sequence[int] = (64,),
              dropout: float = 0.5, deadline: float | None = None) -> PriorResult:
    """The paper's prior: :func:`jaxclp.fit_mlp` on the node features (``graph`` only fixes n).

    Args:
        key: PRNG key (initialisation and dropout).
        graph: the graph (n nodes); not used by the model.
        features: (n, d) dense array, scipy.sparse matrix or :class:`jaxclp.features.SparseFeatures`.
        labels: (n,) int labels; only ``train_mask | val_mask`` entries are read (others may be -1).
        train_mask, val_mask: (n,) bool.
        num_classes: K.
        cfg: training settings (early stopping and the best epoch on ``cfg.metric`` of validation).
        hidden, dropout: the MLP (``hidden=()`` is logistic regression on the features).
        deadline: a :func:`time.perf_counter` time where training stops (in chunks, the best parameters so far
            kept: :func:`jaxclp.train.fit_to_deadline`; ``stopped_at`` then says where); None: none.

    Returns:
        :class:`PriorResult` with prior (n, K).
    """
    n = _check_common(graph, labels, train_mask, val_mask, num_classes)
    if features is None:
        raise ValueError("features is None: the 'mlp' prior needs node features")
    x = as_features(features, jnp.float32)
    _checks.features(x, n)
    opts = dict(num_classes=int(num_classes), hidden=tuple(hidden), dropout=float(dropout))
    res = fit_to_deadline(mlp_build, opts, key, (x,), jnp.asarray(labels), jnp.asarray(train_mask),
                          jnp.asarray(val_mask), cfg, deadline)
    return _trained("mlp", *res, labels, val_mask, cfg, deadline)


# ---------------------------------------------------------------------------------------------- LINK
def link_prior(key: jax.Array, graph: Graph, features, labels, train_mask, val_mask, num_classes: int,
               cfg: TrainConfig = TrainConfig(), *, num_nodes: int | None = None) -> PriorResult:
    """LINK (Lim et al. 2021): logistic regression on the rows of the adjacency (:func:`jaxclp.baselines.fit_link`).

    Args:
        features: ignored (may be None): LINK sees only the graph.
        num_nodes: the real node count of a graph padded to shape buckets (:func:`jaxclp.baselines.fit_link`'s).
        Others: as :func:`mlp_prior`.

    Returns:
        :class:`PriorResult` with prior (n, K); ``best_epoch`` and ``info`` are None (``fit_link`` returns
        only the scores).
    """
    _check_common(graph, labels, train_mask, val_mask, num_classes)
    prior = fit_link(key, graph, jnp.asarray(labels), jnp.asarray(train_mask), jnp.asarray(val_mask),
                     int(num_classes), cfg, num_nodes=num_nodes)
    return PriorResult(prior=prior, name="link", val_score=_score(cfg.metric, prior, labels, val_mask))


# --------------------------------------------------------------------------------------------- LINKX
def adjacency_rows(graph: Graph, dtype=jnp.float32) -> SparseFeatures:
    """The (n, n) adjacency as :class:`SparseFeatures`: row r holds ``weights[e]`` at column s for every edge
    ``e: s -> r`` (the rows :func:`jaxclp.graph.spmm` sums over; for an undirected graph the neighbours of r)."""
    plan = None
    if graph.indptr is not None and graph.transpose_perm is not None:
        plan = TransposePlan(graph.indptr, graph.transpose_perm, graph.transpose_indptr)
    return SparseFeatures(graph.receivers.astype(jnp.int32), graph.senders.astype(jnp.int32),
                          graph.weights.astype(dtype), (graph.num_nodes, graph.num_nodes), plan)


def _batch_norm(h: jax.Array, scale: jax.Array, bias: jax.Array, eps: float = 1e-5, mask=None) -> jax.Array:
    """Normalization of every column over the nodes (the full batch; biased variance), then scale and shift;
    ``mask`` (n,) bool: the statistics over its nodes only (None: all)."""
    if mask is None:
        mean = jnp.mean(h, axis=0)
        var = jnp.mean(jnp.square(h - mean), axis=0)
    else:
        w = mask[:, None].astype(h.dtype)
        count = jnp.sum(w)
        mean = jnp.sum(h * w, axis=0) / count
        var = jnp.sum(jnp.square(h - mean) * w, axis=0) / count
    return (h - mean) * jax.lax.rsqrt(var + eps) * scale + bias


class FullBatchNorm(nn.Module):
    """Batch normalization whose batch is the whole node set, in training and in evaluation alike.

    In full-batch training the running statistics of ``torch.nn.BatchNorm1d`` track exactly these
    statistics; using the current ones at evaluation makes the selected parameters a deterministic
    function of the input (no mutable state). Parameters ``scale`` (ones) and ``bias`` (zeros), (h,).
    """

    eps: float = 1e-5

    @nn.compact
    def __call__(self, h: jax.Array, mask=None) -> jax.Array:
        """``h`` (n, p); ``mask`` (n,) bool: the nodes the statistics run over (None: all)."""
        scale = self.param("scale", nn.initializers.ones_init(), (h.shape[-1],), jnp.float32)
        bias = self.param("bias", nn.initializers.zeros_init(), (h.shape[-1],), jnp.float32)
        return _batch_norm(h, scale.astype(h.dtype), bias.astype(h.dtype), self.eps, mask)


class LinkxMLP(nn.Module):
    """The MLP of the LINKX reference code: per hidden layer ``Dense -> ReLU -> BatchNorm -> Dropout``, then a
    last ``Dense``; ``len(hidden) + 1`` linear maps (no hidden layer: one linear map). A
    :class:`SparseFeatures` input goes through a :class:`jaxclp.mlp.SparseDense` first layer.
    """

    hidden: Sequence[int]
    out: int
    dropout: float = 0.0
    batch_norm: bool = True

    @nn.compact
    def __call__(self, x, *, train: bool, mask=None, fan_in=None) -> jax.Array:
        """``x`` (n, d) -> (n, out); ``mask`` (n,) bool: the real nodes of padded inputs (the batch statistics
        run over them); ``fan_in``: the first layer's real input width where ``x``'s is padded (its LeCun
        initialisation scaled to it; traced, so padded widths share the program). None: ``x`` as it is."""
        widths = tuple(self.hidden) + (self.out,)
        for i, width in enumerate(widths):
            layer = SparseDense if (i == 0 and isinstance(x, SparseFeatures)) else nn.Dense
            init = _lecun_for(fan_in) if (i == 0 and fan_in is not None) else nn.initializers.lecun_normal()
            x = layer(width, kernel_init=init, name=f"Dense_{i}")(x)
            if i < len(widths) - 1:
                x = nn.relu(x)
                if self.batch_norm:
                    x = FullBatchNorm(name=f"BatchNorm_{i}")(x, mask)
                x = nn.Dropout(self.dropout, deterministic=not train)(x)
        return x


class LINKX(nn.Module):
    """LINKX (Lim et al., "Large Scale Learning on Non-Homophilous Graphs", NeurIPS 2021)::

        h_A = MLP_A(A),  h_X = MLP_X(X),  h = ReLU(W [h_A ; h_X] + h_A + h_X),  logits = MLP_f(h)

    with A the (n, n) adjacency rows (sparse: its first layer is a gather and a segment sum over the edges,
    O(|E| p)), X the (n, d) features (dense or :class:`SparseFeatures`) and W a (2p, p) dense layer with bias.
    As in the authors' code, MLP_A and MLP_X have ``init_layers_a`` / ``init_layers_x`` linear maps (1: a single
    ``Dense``) and no dropout, MLP_f has ``num_layers`` maps with dropout, hidden layers are ``Dense -> ReLU ->
    BatchNorm -> Dropout`` (BatchNorm over the full node set: :class:`FullBatchNorm`), and the options
    ``inner_dropout`` / ``inner_activation`` apply dropout / ReLU to ``W [h_A ; h_X]`` (both off by default).
    Initialisation is flax's (LeCun normal kernels, zero biases), as the library's MLP.

    Attributes:
        num_classes: K.
        hidden: width p of every hidden representation.
        num_layers: linear maps of MLP_f (>= 1).
        init_layers_a, init_layers_x: linear maps of MLP_A and MLP_X (>= 1).
        dropout: dropout rate of MLP_f's hidden layers (training only).
        batch_norm: BatchNorm in the hidden layers of the three MLPs.
        inner_dropout, inner_activation: see above.
    """

    num_classes: int
    hidden: int = 64
    num_layers: int = 2
    init_layers_a: int = 1
    init_layers_x: int = 1
    dropout: float = 0.5
    batch_norm: bool = True
    inner_dropout: bool = False
    inner_activation: bool = False

    @nn.compact
    def __call__(self, adjacency: SparseFeatures, x, num_nodes=None, *, train: bool) -> jax.Array:
        """``adjacency`` (n, n) from :func:`adjacency_rows`, ``x`` (n, d) -> (n, K) logits; ``num_nodes``: the real
        node count of inputs padded to shape buckets (a traced scalar: the batch statistics run over the first
        ``num_nodes`` nodes, MLP_A's initialisation has their fan-in), None: unpadded."""
        p = self.hidden
        mask = None if num_nodes is None else jnp.arange(adjacency.shape[0]) < num_nodes
        h_a = LinkxMLP((p,) * (self.init_layers_a - 1), p, 0.0, self.batch_norm, name="mlp_a")(
            adjacency, train=train, mask=mask, fan_in=num_nodes)
        h_x = LinkxMLP((p,) * (self.init_layers_x - 1), p, 0.0, self.batch_norm, name="mlp_x")(x, train=train,
                                                                                                 mask=mask)
        z = nn.Dense(p, name="W")(jnp.concatenate([h_a, h_x], axis=-1))
        if self.inner_dropout:
            z = nn.Dropout(self.dropout, deterministic=not train)(z)
        if self.inner_activation:
            z = nn.relu(z)
        h = nn.relu(z + h_a + h_x)
        return LinkxMLP((p,) * (self.num_layers - 1), self.num_classes, self.dropout, self.batch_norm,
                        name="mlp_f")(h, train=train, mask=mask)


class LinkxSpec(NamedTuple):
    """Hashable :class:`LINKX` architecture (static under jit); fields as :class:`LINKX`'s attributes."""

    hidden: int = 64
    num_layers: int = 2
    init_layers_a: int = 1
    init_layers_x: int = 1
    dropout: float = 0.5
    batch_norm: bool = True
    inner_dropout: bool = False
    inner_activation: bool = False


def _check_linkx_spec(spec: LinkxSpec) -> LinkxSpec:
    for f in ("hidden", "num_layers", "init_layers_a", "init_layers_x"):
        v = getattr(spec, f)
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{f} must be an integer >= 1; got {v!r}")
    if not 0.0 <= float(spec.dropout) < 1.0:
        raise ValueError(f"dropout must lie in [0, 1); got {spec.dropout!r}")
    return LinkxSpec(int(spec.hidden), int(spec.num_layers), int(spec.init_layers_a), int(spec.init_layers_x),
                     float(spec.dropout), bool(spec.batch_norm), bool(spec.inner_dropout),
                     bool(spec.inner_activation))


def linkx_model(num_classes: int, spec: LinkxSpec = LinkxSpec()) -> LINKX:
    return LINKX(num_classes=num_classes, **spec._asdict())


def _linkx_build(graph, features, num_nodes=None, *, num_classes, spec):
    """``(model, inputs, init inputs)`` of :func:`linkx_prior` (:func:`jaxclp.train.fit_to_deadline`'s ``build``)."""
    inputs = (adjacency_rows(graph, jnp.float32), features, num_nodes)
    return linkx_model(num_classes, spec), inputs, inputs


def _lecun_for(fan_in):
    """flax's LeCun normal initializer for a kernel whose first axis is padded: scaled to ``fan_in`` real inputs."""
    base = nn.initializers.lecun_normal()

    def init(key, shape, dtype=jnp.float32):
        return base(key, shape, dtype) * jnp.sqrt(shape[0] / fan_in).astype(dtype)

    return init


def linkx_prior(key: jax.Array, graph: Graph, features, labels, train_mask, val_mask, num_classes: int,
                cfg: TrainConfig = TrainConfig(), *, hidden: int = 64, num_layers: int = 2,
                init_layers_a: int = 1, init_layers_x: int = 1, dropout: float = 0.5, batch_norm: bool = True,
                inner_dropout: bool = False, inner_activation: bool = False,
                deadline: float | None = None, num_nodes: int | None = None) -> PriorResult:
    """Trains :class:`LINKX` full-batch (jitted loop, early stopping on validation ``cfg.metric``).

    Args:
        key: PRNG key (initialisation and dropout).
        graph: the graph (n nodes); its adjacency rows (``graph.weights``) are LINKX's A input.
        features: (n, d) dense array, scipy.sparse matrix or :class:`jaxclp.features.SparseFeatures` (never densified).
        labels: (n,) int labels; only ``train_mask | val_mask`` entries are read.
        train_mask, val_mask: (n,) bool.
        num_classes: K.
        cfg: training settings (lr, weight decay, epochs, patience, metric).
        hidden, num_layers, init_layers_a, init_layers_x, dropout, batch_norm, inner_dropout, inner_activation: the
            architecture (:class:`LINKX`).
        deadline: as :func:`mlp_prior`'s (None: none).
        num_nodes: the real node count of inputs padded to shape buckets (:mod:`jaxclp.buckets`; the batch
            statistics and MLP_A's initial scale follow it, passed as data); None: unpadded.

    Returns:
        :class:`PriorResult` with prior (n, K).
    """
    n = _check_common(graph, labels, train_mask, val_mask, num_classes)
    if features is None:
        raise ValueError("features is None: the 'linkx' prior needs node features (use 'link' without them)")
    x = as_features(features, jnp.float32)
    _checks.features(x, n)
    spec = _check_linkx_spec(LinkxSpec(hidden, num_layers, init_layers_a, init_layers_x, dropout, batch_norm,
                                       inner_dropout, inner_activation))
    real = None if num_nodes is None else jax.device_put(np.float32(num_nodes))
    res = fit_to_deadline(_linkx_build, dict(num_classes=int(num_classes), spec=spec), key, (graph, x, real),
                          jnp.asarray(labels), jnp.asarray(train_mask), jnp.asarray(val_mask), cfg, deadline)
    return _trained("linkx", *res, labels, val_mask, cfg, deadline)


# ---------------------------------------------------------------------------------------------- GNNs
GNN_PRIORS = ("gcn", "h2gcn", "sage", "gat")


def gnn_prior(key: jax.Array, graph: Graph, features, labels, train_mask, val_mask, num_classes: int,
              cfg: TrainConfig = TrainConfig(), *, kind: str = "gcn", deadline: float | None = None,
              **options) -> PriorResult:
    """A GNN of :mod:`jaxclp.gnn` as the prior.

    ``kind``: ``"gcn"`` (:func:`jaxclp.gnn.fit_gcn`: Kipf & Welling's 2-layer GCN, hidden 64, dropout 0.5),
    ``"h2gcn"`` (:func:`jaxclp.gnn.fit_h2gcn`), ``"sage"`` / ``"gat"`` (:func:`jaxclp.gnn.fit_gnn` with
    ``GNNSpec(conv=kind, hidden=64, num_layers=2, dropout=0.5, heads=4)``). ``options`` go to the fit function
    (``hidden``, ``dropout``, ... ; for h2gcn also ``two_hop``, the graph's :func:`jaxclp.gnn.two_hop_graph`: built once
    by a caller that fits it several times on one graph, ``fit_prior("h2gcn", ..., two_hop=...)``, else per fit;
    for sage / gat the :class:`jaxclp.gnn.GNNSpec` fields).

    Args:
        features: (n, d) features: dense, scipy.sparse or :class:`jaxclp.features.SparseFeatures` (never densified).
        deadline: as :func:`mlp_prior`'s (None: none).
        Others: as :func:`mlp_prior`.

    Returns:
        :class:`PriorResult` with prior (n, K).
    """
    if kind not in GNN_PRIORS:
        raise ValueError(f"kind must be one of {GNN_PRIORS}; got {kind!r}")
    n = _check_common(graph, labels, train_mask, val_mask, num_classes)
    x = _gnn_features(features, n, kind)
    args = (key, graph, x, jnp.asarray(labels), jnp.asarray(train_mask), jnp.asarray(val_mask))
    if kind == "gcn":
        res = gnn.fit_gcn(*args, num_classes=int(num_classes), cfg=cfg, deadline=deadline, **options)
    elif kind == "h2gcn":
        res = gnn.fit_h2gcn(*args, num_classes=int(num_classes), cfg=cfg, deadline=deadline, **options)
    else:
        spec = gnn.GNNSpec(conv=kind, hidden=64, num_layers=2, dropout=0.5, heads=4)._replace(**options)
        res = gnn.fit_gnn(*args, num_classes=int(num_classes), spec=spec, cfg=cfg, deadline=deadline)
    return _trained(kind, res.prior, res.params, res.info, labels, val_mask, cfg, deadline)


TUNED_PRIORS = ("gcn_tuned", "sage_tuned", "gat_tuned")
TUNED_RUNGS: tuple = HALVING_RUNGS
"""Successive halving's rungs for the tuned GNN priors' grids (:func:`tuned_gnn_prior`; ``()``: none): the one
setting :class:`jaxclp.CLP` and the runner's ``clp`` both read (its method hash too). :data:`jaxclp.gnn.HALVING_RUNGS`,
adopted after it passed its criterion on held-out graphs (``benchmarks/results/halving_held_out.md``)."""
TUNED_RUNGS_MIN_VAL: int = HALVING_MIN_VAL
"""Validation nodes from which :data:`TUNED_RUNGS` applies (:func:`jaxclp.gnn.fit_gnn_grid`'s ``rungs_min_val``;
:data:`jaxclp.gnn.HALVING_MIN_VAL`): smaller validation sets rank the specs too coarsely to cut them early
(``benchmarks/results/halving.md``: the airport graphs)."""


def tuned_gnn_prior(key: jax.Array, graph: Graph, features, labels, train_mask, val_mask, num_classes: int,
                    cfg: TrainConfig = TrainConfig(), *, kind: str = "gcn", sep: bool = False, grid=None,
                    lr: float | None = None, weight_decay: float = 0.0, rungs=None,
                    rungs_min_val: int = 0, deadline: float | None = None) -> PriorResult:
    """A tuned GNN as the prior: every spec of ``grid`` is fitted (:func:`jaxclp.gnn.fit_gnn_grid`: same ``key``, one
    compiled program for the grid) and the
    one with the best validation ``cfg.metric`` is kept (the first on ties; nested selection on validation only).

    Args:
        kind: block type, ``"gcn"``, ``"sage"`` or ``"gat"``.
        sep: GCN-sep / GAT-sep (ego embedding kept apart).
        grid: the :class:`jaxclp.gnn.GNNSpec` candidates; None: :func:`jaxclp.gnn.tuned_grid` ``(kind, sep)``
            (plain blocks at depths 1-3, residual + LayerNorm + feed-forward blocks at depths 1-5).
        cfg: epochs, patience, optimizer and metric of every fit; its learning rate and weight decay are replaced
            by the tuned recipe's (``lr`` None: :data:`jaxclp.gnn.TUNED_LR` = 1e-3; ``weight_decay`` 0).
        rungs: successive halving over the grid (:func:`jaxclp.gnn.fit_gnn_grid`'s ``rungs``); None:
            :data:`TUNED_RUNGS` from :data:`TUNED_RUNGS_MIN_VAL` validation nodes; ``()``: every spec trained to
            the end (or its early stop).
        rungs_min_val: with ``rungs`` given, halve only with at least this many validation nodes
            (``fit_gnn_grid``'s; e.g. :data:`jaxclp.gnn.HALVING_MIN_VAL`).
        deadline: a :func:`time.perf_counter` time where training stops (:func:`jaxclp.gnn.fit_gnn_grid`'s: in
            rounds, every spec keeping its best parameters so far); None: none.
        Others: as :func:`mlp_prior` (features dense or sparse).

    Returns:
        :class:`PriorResult` named ``f"{kind}_tuned"`` (``"-sep"`` appended for ``sep``); ``choice`` is the
        chosen spec, ``val_score`` its validation score; ``stopped_at`` the epoch where ``deadline`` stopped the
        grid (None where it did not: every spec ran to ``cfg.epochs``, its early stop or its rung).

    Raises:
        ValueError: unknown ``kind``, an empty ``grid``, a spec whose conv is not ``kind``, or the checks of
            :func:`jaxclp.gnn.fit_gnn`.
    """
    if kind not in ("gcn", "sage", "gat"):
        raise ValueError(f"kind must be one of ('gcn', 'sage', 'gat'); got {kind!r}")
    specs = list(gnn.tuned_grid(kind, sep) if grid is None else grid)
    if not specs:
        raise ValueError("grid is empty: a tuned GNN prior needs at least one GNNSpec")
    for s in specs:
        if not isinstance(s, gnn.GNNSpec) or s.conv != kind:
            raise ValueError(f"grid must hold GNNSpecs with conv={kind!r}; got {s!r}")
    n = _check_common(graph, labels, train_mask, val_mask, num_classes)
    x = _gnn_features(features, n, f"{kind}_tuned")
    fit_cfg = gnn.tuned_train_config(cfg, gnn.TUNED_LR if lr is None else lr, weight_decay)
    name = f"{kind}_tuned" + ("-sep" if sep else "")
    best = None
    fits = gnn.fit_gnn_grid(key, graph, x, jnp.asarray(labels), jnp.asarray(train_mask), jnp.asarray(val_mask),
                            num_classes=int(num_classes), specs=specs, cfg=fit_cfg,
                            rungs=TUNED_RUNGS if rungs is None else rungs,
                            rungs_min_val=TUNED_RUNGS_MIN_VAL if rungs is None else rungs_min_val,
                            deadline=deadline)
    for spec, res in zip(specs, fits):
        r = _trained(name, res.prior, res.params, res.info, labels, val_mask, fit_cfg)._replace(choice=spec)
        if best is None or (np.isfinite(r.val_score) and not r.val_score <= best.val_score):
            best = r
    return best._replace(stopped_at=stopped_at([f.info for f in fits], fit_cfg) if deadline is not None else None)


PRIORS: dict[str, Callable[..., PriorResult]] = {
    "mlp": mlp_prior,
    "link": link_prior,
    "linkx": linkx_prior,
    **{k: functools.partial(gnn_prior, kind=k) for k in GNN_PRIORS},
    **{k: functools.partial(tuned_gnn_prior, kind=k.split("_")[0]) for k in TUNED_PRIORS},
}
"""Built-in priors by name; each ``fn(key, graph, features, labels, train_mask, val_mask, num_classes, cfg,
**options) -> PriorResult``."""


# -------------------------------------------------------------------------------------------- dispatch
DEADLINE_PRIORS = ("mlp", "linkx", *GNN_PRIORS, *TUNED_PRIORS)
"""The named predictors whose fit takes ``deadline=`` (a :func:`time.perf_counter` time where training stops, in
chunks: :func:`jaxclp.train.fit_to_deadline`; :attr:`PriorResult.stopped_at` says where): every trained one but
LINK, a linear model whose fit is seconds on every graph of the tables."""

def check_prior(prior, num_nodes: int, num_classes: int, name: str = "prior") -> jax.Array:
    """Validates a given (n, K) prior and returns it as a jax array (never rescaled).

    Raises:
        ValueError naming ``name``: not a numeric 2-D array of shape (num_nodes, num_classes), not floating,
        NaN/inf or negative entries, or a row that does not sum to 1 within :data:`PRIOR_ROW_ATOL`.
    """
    arr = np.asarray(prior) if not isinstance(prior, jax.Array) else prior
    if getattr(arr, "dtype", None) is None or arr.dtype == object:
        raise ValueError(f"{name} must be a numeric (n, K) array; got {type(prior).__name__}")
    _checks.shape(name, arr, (num_nodes, num_classes))
    _checks.floating(name, arr)
    _checks.probabilities(name, arr, num_nodes, num_classes)
    _checks.prior_rows(name, arr, PRIOR_ROW_ATOL)
    return jnp.asarray(arr)


def _align_columns(p: np.ndarray, est_classes, classes, name: str) -> np.ndarray:
    """Columns of ``p`` (ordered by ``est_classes``) reordered to ``classes``; a class the estimator never saw
    gets a zero column; a class of the estimator outside ``classes`` is refused."""
    est = np.asarray(est_classes)
    ours = np.asarray(classes)
    extra = np.setdiff1d(est, ours)
    if extra.size:
        raise ValueError(f"{name}.classes_ holds class(es) {extra[:5].tolist()} that are not among the classes "
                         f"{ours.tolist()}")
    if p.ndim != 2 or p.shape[1] != est.size:
        raise ValueError(f"{name}.predict_proba returned shape {p.shape}; expected (n, {est.size}) for its "
                         f"classes_ {est.tolist()}")
    out = np.zeros((p.shape[0], ours.size), dtype=p.dtype if np.issubdtype(p.dtype, np.floating) else float)
    for j, c in enumerate(est):
        out[:, int(np.flatnonzero(ours == c)[0])] = p[:, j]
    return out


def fit_prior(prior, key: jax.Array, graph: Graph, features, labels, train_mask, val_mask, num_classes: int,
              cfg: TrainConfig = TrainConfig(), *, classes=None, shape_buckets: bool = False,
              **options) -> PriorResult:
    """The prior D of a CLP run from any source.

    Args:
        prior: one of

            * a name in :data:`PRIORS` (``"mlp"``, ``"link"``, ``"linkx"``, ``"gcn"``, ``"h2gcn"``, ``"sage"``,
              ``"gat"``, ``"gcn_tuned"``, ``"sage_tuned"``, ``"gat_tuned"``): that predictor is trained on
              ``train_mask`` with early stopping on ``val_mask`` (a tuned GNN's spec also chosen on ``val_mask``);
            * an (n, K) array: checked (shape, floating, finite, nonnegative, rows summing to 1 within
              :data:`PRIOR_ROW_ATOL`) and used as is;
            * a fitted object with ``predict_proba`` (e.g. a scikit-learn classifier): ``predict_proba(features)``
              is taken as D and checked as an array; with ``classes`` given and the object having ``classes_``,
              its columns are reordered to ``classes`` (a class it never saw gets probability 0); an object with
              ``transductive = True`` (a fitted :class:`jaxclp.CLP`) is called as ``predict_proba()`` and
              predicts the nodes of the graph it was fitted on;
            * a callable with the signature of the :data:`PRIORS` functions, returning a :class:`PriorResult`
              or an (n, K) array.
        key: PRNG key of the training.
        graph: the graph (n nodes).
        features: (n, d) node features (dense, scipy.sparse or :class:`jaxclp.features.SparseFeatures`), or None where
            the prior needs none (an array, ``"link"``).
        labels: (n,) int labels in [0, K) on ``train_mask | val_mask`` (-1 elsewhere is fine; never read).
        train_mask, val_mask: (n,) bool.
        num_classes: K.
        cfg: training settings of a named prior (early stopping and best epoch on ``cfg.metric``).
        classes: (K,) label values the columns stand for (only used to align a ``predict_proba`` output).
        shape_buckets: fit a predictor of :data:`jaxclp.buckets.BUCKETED_PRIORS` on its inputs padded to shape
            buckets (:func:`jaxclp.buckets.pad_inputs`): graphs of similar size then share its compiled programs;
            the same computation as the unpadded fit up to rounding (:data:`jaxclp.buckets.BUCKETED_PRIORS`). Other
            priors ignore it.
        **options: keyword options of a named prior (e.g. ``hidden=(64, 64)`` for ``"mlp"``).

    Returns:
        :class:`PriorResult`; ``prior`` is (n, K), rows summing to 1.

    Raises:
        ValueError: naming ``prior`` for an unknown name, an unusable object or a bad array, else naming the
            argument at fault (masks, labels, features, num_classes).
    """
    if isinstance(prior, str):
        if prior not in PRIORS:
            raise ValueError(f"prior must be one of {sorted(PRIORS)}, an (n, K) array or a fitted object with "
                             f"predict_proba; got {prior!r}")
        if shape_buckets and prior in buckets.BUCKETED_PRIORS:
            _check_common(graph, labels, train_mask, val_mask, num_classes)
            two_hop = options.get("two_hop")
            if prior == "h2gcn" and two_hop is None:  # the real graph's, padded to its own edge bucket
                two_hop = gnn.default_two_hop_graph(graph)
            p = buckets.pad_inputs(graph, None if features is None else as_features(features), labels, train_mask,
                                   val_mask, two_hop)
            padded_two_hop = {"two_hop": p.two_hop} if p.two_hop is not None else {}
            options = options | padded_two_hop | buckets.node_count(p, prior)
            res = PRIORS[prior](key, p.graph, p.features, p.labels, p.train_mask, p.val_mask, num_classes, cfg,
                                **options)
            res = res._replace(prior=buckets.unpad_nodes(res.prior, p.num_nodes))
        else:
            res = PRIORS[prior](key, graph, features, labels, train_mask, val_mask, num_classes, cfg, **options)
        return res._replace(prior=check_prior(res.prior, graph.num_nodes, int(num_classes)))
    n = _check_common(graph, labels, train_mask, val_mask, num_classes)
    k = int(num_classes)
    if options:
        raise ValueError(f"options {sorted(options)} apply to a named prior only; prior is a "
                         f"{type(prior).__name__}")
    if hasattr(prior, "predict_proba"):
        if getattr(prior, "transductive", False):  # e.g. a fitted jaxclp.CLP: predicts its own graph's nodes
            p, est_classes = np.asarray(prior.predict_proba()), prior.classes_
        else:
            if features is None:
                raise ValueError("features is None: prior.predict_proba needs the node features")
            try:
                p = np.asarray(prior.predict_proba(features))
            except Exception as e:  # noqa: BLE001 - the user's object; say which argument failed
                raise ValueError(f"prior.predict_proba(features) failed: {type(e).__name__}: {e}") from e
            est_classes = getattr(prior, "classes_", None)
        if classes is not None and est_classes is not None:
            p = _align_columns(p, est_classes, classes, "prior")
        d = check_prior(p, n, k, name="prior.predict_proba(features)")
        return PriorResult(prior=d, name="predict_proba", val_score=_score(cfg.metric, d, labels, val_mask))
    if callable(prior):
        res = prior(key, graph, features, labels, train_mask, val_mask, k, cfg)
        if isinstance(res, PriorResult):
            return res._replace(prior=check_prior(res.prior, n, k, name="prior(...).prior"))
        d = check_prior(res, n, k, name="prior(...)")
        return PriorResult(prior=d, name=getattr(prior, "__name__", "callable"),
                           val_score=_score(cfg.metric, d, labels, val_mask))
    if isinstance(prior, (np.ndarray, jax.Array, list, tuple)):
        d = check_prior(prior, n, k)
        return PriorResult(prior=d, name="array", val_score=_score(cfg.metric, d, labels, val_mask))
    raise ValueError(f"prior must be one of {sorted(PRIORS)}, an (n, K) array, a fitted object with "
                     f"predict_proba or a callable; got {type(prior).__name__}")
