"""Fitting the GNNs full-batch: :func:`fit_gcn`, :func:`fit_h2gcn`, :func:`fit_gnn` (a :class:`TunedGNN`) and their
``*_splits`` (vmapped over splits), each one jitted XLA program around :func:`jaxclp.train.train_full_batch`
(optax, ``lax.while_loop`` with validation early stopping), or chunked programs to a ``deadline``."""

from __future__ import annotations

import functools
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxclp import _checks
from jaxclp._rng import fast_key, init_key as _init_key
from jaxclp.features import as_features, as_input_features
from jaxclp.gnn.graphs import gcn_normalized_graph, h2gcn_normalized_graphs
from jaxclp.gnn.models import GCN, H2GCN, GNNSpec, _check_spec, _model, tuned_gnn_graph
from jaxclp.gnn.two_hop import _check_two_hop, default_two_hop_graph
from jaxclp.graph import Graph
from jaxclp.sparse import transpose_plan
from jaxclp.train import TrainConfig, TrainInfo, fit_to_deadline, train_full_batch


# ------------------------------------------------------------------------------------------ fitting
class GNNResult(NamedTuple):
    """Output of :func:`fit_gcn` / :func:`fit_h2gcn` (every field gains a leading S axis for ``*_splits``).

    Attributes:
        prior: (n, K) softmax output at the selected parameters.
        params: the selected parameters (flax variables dict).
        info: :class:`jaxclp.train.TrainInfo`.
    """

    prior: jax.Array
    params: dict
    info: TrainInfo


def _validate(graph, features, labels, train_mask, val_mask, num_classes, hidden, dropout, *, scalar_hidden,
              splits=False, keys=None, to_features=as_features):
    """Eager checks of the fit_* inputs; returns ``(num_classes, hidden, features)``: int / tuple, and the
    float32 features as ``to_features`` converts them (:func:`jaxclp.features.as_features` or
    :func:`jaxclp.features.as_input_features`)."""
    if not isinstance(graph, Graph):
        raise ValueError(f"graph must be a jaxclp Graph; got {type(graph).__name__}")
    n = graph.num_nodes
    features = to_features(features, jnp.float32)  # converted once; SparseFeatures for sparse input
    _checks.features(features, n)
    _checks.shape("labels", labels, (n,))
    if _checks.is_concrete(labels) and not np.issubdtype(np.asarray(labels).dtype, np.integer):
        raise ValueError(f"labels must be integers; got dtype {np.asarray(labels).dtype}")
    num_classes = int(num_classes)
    if num_classes < 2:
        raise ValueError(f"num_classes must be >= 2; got {num_classes}")
    if splits:
        _checks.shape("train_masks", train_mask, (None, n))
        s = np.shape(train_mask)[0]
        _checks.shape("val_masks", val_mask, (s, n))
        if keys is not None and np.shape(keys)[0] != s:
            raise ValueError(f"keys must have a leading axis of size {s} (one per split); got {np.shape(keys)}")
        for i in range(s) if _checks.is_concrete(train_mask, val_mask) else ():
            _checks.mask(f"train_masks[{i}]", np.asarray(train_mask)[i], n)
            _checks.mask(f"val_masks[{i}]", np.asarray(val_mask)[i], n, nonempty=False)
        seen = np.any(np.asarray(train_mask) | np.asarray(val_mask), axis=0) if _checks.is_concrete(
            train_mask, val_mask) else None
    else:
        _checks.mask("train_mask", train_mask, n)
        _checks.mask("val_mask", val_mask, n, nonempty=False)
        seen = np.asarray(train_mask) | np.asarray(val_mask) if _checks.is_concrete(train_mask, val_mask) else None
    if seen is not None and _checks.is_concrete(labels):
        y = np.asarray(labels)[seen]
        if y.size and (y.min() < 0 or y.max() >= num_classes):
            raise ValueError(f"labels on train/val nodes must lie in [0, {num_classes}); "
                             f"got range [{y.min()}, {y.max()}]")
    if scalar_hidden != (np.ndim(hidden) == 0):
        want = "an int (embedding width)" if scalar_hidden else "a sequence of widths"
        raise ValueError(f"hidden must be {want}; got {hidden!r}")
    hidden_t = (int(hidden),) if scalar_hidden else tuple(int(h) for h in hidden)
    if any(h < 1 for h in hidden_t):
        raise ValueError(f"hidden widths must be positive; got {hidden!r}")
    if not 0.0 <= float(dropout) < 1.0:
        raise ValueError(f"dropout must lie in [0, 1); got {dropout}")
    return num_classes, (hidden_t[0] if scalar_hidden else hidden_t), features


def _train_model(model, inputs: tuple, key, labels, train_mask, val_mask, cfg) -> "GNNResult":
    """Initializes ``model`` on ``inputs`` (its positional graph arguments), trains it full-batch with early
    stopping (:func:`jaxclp.train.train_full_batch`) and returns the softmax of the best parameters."""
    init_key, drop_key = jax.random.split(key)
    params = model.init(_init_key(init_key), *inputs, train=False)

    def apply_fn(p, k, train):
        # dropout masks through jaxclp's key type: JAX's bits, hashed ~10x faster on CPU (jaxclp/_rng.py)
        return model.apply(p, *inputs, train=train, rngs={"dropout": fast_key(k)})

    best, info = train_full_batch(apply_fn, params, drop_key, labels, train_mask, val_mask, cfg)
    prior = jax.nn.softmax(model.apply(best, *inputs, train=False), axis=-1)
    return GNNResult(prior, best, info)



def _gcn_build(graph, features, *, num_classes, hidden, dropout):
    """``(model, inputs, init inputs)`` of :func:`fit_gcn` (:func:`jaxclp.train.fit_to_deadline`'s ``build``)."""
    # an undirected graph's GCN matrix D^-1/2 (A + I) D^-1/2 is symmetric: CSR kernel, gradient without a sort
    model = GCN(hidden=hidden, num_classes=num_classes, dropout=dropout, receivers_sorted=True,
                symmetric=bool(graph.symmetric))
    gt = gcn_normalized_graph(graph, nodes=features)
    return model, (gt,), (gt,)


def _h2gcn_build(graph, two_hop, features, *, num_classes, hidden, dropout, num_rounds):
    """``(model, inputs, init inputs)`` of :func:`fit_h2gcn`."""
    model = H2GCN(hidden=hidden, num_classes=num_classes, dropout=dropout, num_rounds=num_rounds,
                  receivers_sorted=True, symmetric=bool(graph.symmetric and two_hop.symmetric))
    hops = h2gcn_normalized_graphs(graph, two_hop, nodes=features)
    return model, hops, hops


def _gcn_kernel(key, graph, features, labels, train_mask, val_mask, *, num_classes, hidden, dropout, cfg):
    """Unvalidated, jit/vmap-able body of :func:`fit_gcn`."""
    model, inputs, _ = _gcn_build(graph, features, num_classes=num_classes, hidden=hidden, dropout=dropout)
    return _train_model(model, inputs, key, labels, train_mask, val_mask, cfg)


def _h2gcn_kernel(key, graph, two_hop, features, labels, train_mask, val_mask, *, num_classes, hidden, dropout,
                  num_rounds, cfg):
    """Unvalidated, jit/vmap-able body of :func:`fit_h2gcn`."""
    model, inputs, _ = _h2gcn_build(graph, two_hop, features, num_classes=num_classes, hidden=hidden,
                                    dropout=dropout, num_rounds=num_rounds)
    return _train_model(model, inputs, key, labels, train_mask, val_mask, cfg)


_GCN_STATIC = ("num_classes", "hidden", "dropout", "cfg")
_H2GCN_STATIC = ("num_classes", "hidden", "dropout", "num_rounds", "cfg")


@functools.partial(jax.jit, static_argnames=_GCN_STATIC)
def _fit_gcn_splits_jit(keys, graph, features, labels, train_masks, val_masks, *, num_classes, hidden, dropout,
                        cfg):
    f = functools.partial(_gcn_kernel, num_classes=num_classes, hidden=hidden, dropout=dropout, cfg=cfg)
    return jax.vmap(f, in_axes=(0, None, None, None, 0, 0))(keys, graph, features, labels, train_masks,
                                                            val_masks)


@functools.partial(jax.jit, static_argnames=_H2GCN_STATIC)
def _fit_h2gcn_splits_jit(keys, graph, two_hop, features, labels, train_masks, val_masks, *, num_classes, hidden,
                          dropout, num_rounds, cfg):
    f = functools.partial(_h2gcn_kernel, num_classes=num_classes, hidden=hidden, dropout=dropout,
                          num_rounds=num_rounds, cfg=cfg)
    return jax.vmap(f, in_axes=(0, None, None, None, None, 0, 0))(keys, graph, two_hop, features, labels,
                                                                  train_masks, val_masks)


def fit_gcn(
    key: jax.Array,
    graph: Graph,
    features: jax.Array,
    labels: jax.Array,
    train_mask: jax.Array,
    val_mask: jax.Array,
    *,
    num_classes: int,
    hidden: Sequence[int] = (64,),
    dropout: float = 0.5,
    cfg: TrainConfig = TrainConfig(),
    deadline: float | None = None,
) -> GNNResult:
    """Trains a GCN full-batch (jitted loop, early stopping on validation ``cfg.metric``).

    Args:
        key: PRNG key (initialisation and dropout).
        graph: the graph (n nodes); self-loops are added inside the normalization
            (:func:`gcn_normalized_graph`).
        features: (n, d) float features (cast to float32): dense, scipy.sparse or
            :class:`jaxclp.features.SparseFeatures` (the first layer is then a sparse product, never densified;
            dense input stays dense: this GCN drops its input features, and a sparse input draws other masks).
        labels: (n,) int labels; only ``train_mask | val_mask`` entries are read (others may be -1).
        train_mask, val_mask: (n,) bool.
        num_classes: K.
        hidden: hidden widths; ``(64,)`` is the 2-layer GCN.
        dropout: dropout rate on every layer's input.
        cfg: optimiser settings.
        deadline: as :func:`fit_gnn`'s (None: none).

    Returns:
        :class:`GNNResult` with prior (n, K).

    Raises:
        ValueError: shape mismatch, NaN/inf features, non-boolean or empty train mask, train/val labels out
            of [0, K), bad ``hidden`` / ``dropout``.
    """
    num_classes, hidden, x = _validate(graph, features, labels, train_mask, val_mask, num_classes, hidden, dropout,
                                       scalar_hidden=False)
    opts = dict(num_classes=num_classes, hidden=hidden, dropout=float(dropout))
    return GNNResult(*fit_to_deadline(_gcn_build, opts, key, (graph, x), jnp.asarray(labels), train_mask, val_mask,
                                      cfg, deadline))


def fit_gcn_splits(keys, graph: Graph, features, labels, train_masks, val_masks, *, num_classes: int,
                   hidden: Sequence[int] = (64,), dropout: float = 0.5, cfg: TrainConfig = TrainConfig()
                   ) -> GNNResult:
    """:func:`fit_gcn` vmapped over S splits: keys (S, ...), masks (S, n) -> prior (S, n, K).

    Split ``i`` gives the same result as ``fit_gcn(keys[i], ..., train_masks[i], val_masks[i])`` (up to
    floating-point reassociation under vmap).
    """
    num_classes, hidden, x = _validate(graph, features, labels, train_masks, val_masks, num_classes, hidden,
                                       dropout, scalar_hidden=False, splits=True, keys=keys)
    return _fit_gcn_splits_jit(keys, graph, x, jnp.asarray(labels),
                               train_masks, val_masks, num_classes=num_classes, hidden=hidden,
                               dropout=float(dropout), cfg=cfg)


def fit_h2gcn(
    key: jax.Array,
    graph: Graph,
    features: jax.Array,
    labels: jax.Array,
    train_mask: jax.Array,
    val_mask: jax.Array,
    *,
    num_classes: int,
    hidden: int = 64,
    dropout: float = 0.5,
    num_rounds: int = 2,
    two_hop: Graph | None = None,
    cfg: TrainConfig = TrainConfig(),
    deadline: float | None = None,
) -> GNNResult:
    """Trains H2GCN full-batch (jitted loop, early stopping on validation ``cfg.metric``).

    Args:
        key: PRNG key (initialisation and dropout).
        graph: the graph (n nodes); its self-loops are ignored.
        features: (n, d) float features (cast to float32): dense, scipy.sparse or
            :class:`jaxclp.features.SparseFeatures` (the first layer is then a sparse product, never densified; dense
            features with <= 5 % nonzeros are passed the same way, :func:`jaxclp.features.as_input_features`).
        labels: (n,) int labels; only ``train_mask | val_mask`` entries are read (others may be -1).
        train_mask, val_mask: (n,) bool.
        num_classes: K.
        hidden: embedding width p (the final representation has ``(2^(R+1) - 1) p`` = 7p columns).
        dropout: dropout rate on the final representation.
        num_rounds: R aggregation rounds (2 in the paper).
        two_hop: precomputed :func:`jaxclp.gnn.two_hop_graph` of ``graph``; None: built on the host by this call
            (refused above :data:`jaxclp.gnn.MAX_TWO_HOP_EDGES` pairs). Several fits on one graph (per split, or
            again as a base predictor) build it once and pass it: the fits are bit for bit the same.
        cfg: optimiser settings.
        deadline: as :func:`fit_gnn`'s (None: none).

    Returns:
        :class:`GNNResult` with prior (n, K).

    Raises:
        ValueError: as :func:`fit_gcn`, plus a ``two_hop`` graph of the wrong size.
        TwoHopTooLarge: (a ValueError) ``two_hop`` omitted and the 2-hop graph above :data:`MAX_TWO_HOP_EDGES`.
    """
    num_classes, hidden, x = _validate(graph, features, labels, train_mask, val_mask, num_classes, hidden, dropout,
                                       scalar_hidden=True, to_features=as_input_features)
    two_hop = _two_hop_or_check(graph, two_hop, num_rounds)
    opts = dict(num_classes=num_classes, hidden=int(hidden), dropout=float(dropout), num_rounds=int(num_rounds))
    return GNNResult(*fit_to_deadline(_h2gcn_build, opts, key, (graph, two_hop, x), jnp.asarray(labels), train_mask,
                                      val_mask, cfg, deadline))


def fit_h2gcn_splits(keys, graph: Graph, features, labels, train_masks, val_masks, *, num_classes: int,
                     hidden: int = 64, dropout: float = 0.5, num_rounds: int = 2, two_hop: Graph | None = None,
                     cfg: TrainConfig = TrainConfig()) -> GNNResult:
    """:func:`fit_h2gcn` vmapped over S splits: keys (S, ...), masks (S, n) -> prior (S, n, K); ``two_hop`` as
    :func:`fit_h2gcn`'s (built once for all splits when omitted)."""
    num_classes, hidden, x = _validate(graph, features, labels, train_masks, val_masks, num_classes, hidden,
                                       dropout, scalar_hidden=True, splits=True, keys=keys,
                                       to_features=as_input_features)
    two_hop = _two_hop_or_check(graph, two_hop, num_rounds)
    return _fit_h2gcn_splits_jit(keys, graph, two_hop, x, jnp.asarray(labels),
                                 train_masks, val_masks, num_classes=num_classes, hidden=int(hidden),
                                 dropout=float(dropout), num_rounds=int(num_rounds), cfg=cfg)


def _two_hop_or_check(graph, two_hop, num_rounds):
    """``two_hop`` checked against ``graph``, or built (:func:`jaxclp.gnn.two_hop.default_two_hop_graph`) when None."""
    if int(num_rounds) < 1:
        raise ValueError(f"num_rounds must be >= 1; got {num_rounds}")
    if two_hop is None:
        return default_two_hop_graph(graph)
    _check_two_hop(graph, two_hop)
    return two_hop



# -------------------------------------------------------------------------------- tuned GNNs
def _tuned_build(graph, features, *, num_classes, spec):
    """``(model, inputs, init inputs)`` of :func:`fit_gnn`."""
    gt = tuned_gnn_graph(graph, spec.conv, spec.sep, nodes=features)
    symmetric = bool(graph.symmetric) and spec.conv == "gcn"  # GCN / GCN-sep: the symmetric CSR path, no plan
    plan = None if symmetric or spec.conv == "none" else transpose_plan(gt.senders, gt.receivers, graph.num_nodes)
    return _model(spec, num_classes, bool(graph.symmetric)), (gt, plan), (gt, plan)


def _tuned_kernel(key, graph, features, labels, train_mask, val_mask, *, num_classes, spec, cfg):
    model, inputs, _ = _tuned_build(graph, features, num_classes=num_classes, spec=spec)
    return _train_model(model, inputs, key, labels, train_mask, val_mask, cfg)


_TUNED_STATIC = ("num_classes", "spec", "cfg")


@functools.partial(jax.jit, static_argnames=_TUNED_STATIC)
def _fit_tuned_splits_jit(keys, graph, features, labels, train_masks, val_masks, *, num_classes, spec, cfg):
    f = functools.partial(_tuned_kernel, num_classes=num_classes, spec=spec, cfg=cfg)
    return jax.vmap(f, in_axes=(0, None, None, None, 0, 0))(keys, graph, features, labels, train_masks,
                                                            val_masks)


def _tuned_input(spec: GNNSpec):
    """Sparse-enough dense features enter as SparseFeatures unless the input itself is dropped out (whose masks
    a sparse input would draw differently)."""
    return as_features if spec.input_dropout else as_input_features


def fit_gnn(key: jax.Array, graph: Graph, features, labels, train_mask, val_mask, *, num_classes: int,
            spec: GNNSpec = GNNSpec(), cfg: TrainConfig = TrainConfig(),
            deadline: float | None = None) -> "GNNResult":
    """Trains a :class:`TunedGNN` (GCN / SAGE / GAT, options in ``spec``) full-batch with early stopping on
    validation ``cfg.metric``.

    Args:
        key: PRNG key (initialisation and dropout).
        graph: the graph (n nodes).
        features: (n, d) float features (cast to float32): dense, scipy.sparse or
            :class:`jaxclp.features.SparseFeatures` (the first layer is then a sparse product, never densified; dense
            features with <= 5 % nonzeros are passed the same way unless ``spec.input_dropout``,
            :func:`jaxclp.features.as_input_features`).
        labels: (n,) int labels; only ``train_mask | val_mask`` entries are read.
        train_mask, val_mask: (n,) bool.
        num_classes: K.
        spec: :class:`GNNSpec` architecture.
        cfg: optimiser settings (pass ``metric=dataset.metric``).
        deadline: a :func:`time.perf_counter` time where training stops (in chunks, the best parameters so far
            kept: :func:`jaxclp.train.fit_to_deadline`); None: none.

    Returns:
        :class:`GNNResult`; ``.prior`` (n, K) softmax usable as a CLP prior.

    Raises:
        ValueError: as :func:`fit_gcn`, plus a bad ``spec``.
    """
    spec = _check_spec(spec)
    num_classes, _, x = _validate(graph, features, labels, train_mask, val_mask, num_classes, (spec.hidden,),
                                  spec.dropout, scalar_hidden=False, to_features=_tuned_input(spec))
    return GNNResult(*fit_to_deadline(_tuned_build, dict(num_classes=num_classes, spec=spec), key, (graph, x),
                                      jnp.asarray(labels), train_mask, val_mask, cfg, deadline))


def fit_gnn_splits(keys, graph: Graph, features, labels, train_masks, val_masks, *, num_classes: int,
                   spec: GNNSpec = GNNSpec(), cfg: TrainConfig = TrainConfig(),
                   chunk: int | None = None) -> "GNNResult":
    """:func:`fit_gnn` vmapped over S splits: keys (S,), masks (S, n) -> prior (S, n, K).

    Args:
        chunk: fit at most this many splits per vmapped program (bounds memory: activations scale with the
            number of splits in one program); ``None`` fits all S at once.
    """
    spec = _check_spec(spec)
    num_classes, _, x = _validate(graph, features, labels, train_masks, val_masks, num_classes, (spec.hidden,),
                                  spec.dropout, scalar_hidden=False, splits=True, keys=keys,
                                  to_features=_tuned_input(spec))
    y = jnp.asarray(labels)
    s = np.shape(train_masks)[0]
    step = s if chunk is None else max(1, int(chunk))
    parts = [_fit_tuned_splits_jit(keys[i:i + step], graph, x, y, train_masks[i:i + step], val_masks[i:i + step],
                                   num_classes=num_classes, spec=spec, cfg=cfg) for i in range(0, s, step)]
    return parts[0] if len(parts) == 1 else jax.tree_util.tree_map(lambda *a: jnp.concatenate(a), *parts)
