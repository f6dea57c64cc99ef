"""The base predictor: a flax MLP on node features only (method step 1)."""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxclp import _checks
from jaxclp._rng import fast_key, init_key as _init_key
from jaxclp.features import SparseFeatures, as_features, matmul
from jaxclp.program_store import stored_jit
from jaxclp.train import (DEADLINE_EPOCHS, TrainConfig, TrainInfo, _built, _label_axis, blank_state, count_params,
                          fit_in_chunks, fit_splits_to_deadline, make_optimizer, train_chunk, train_full_batch,
                          train_outcome, train_start, validation_metric)


class SparseDense(nn.Module):
    """``nn.Dense`` for a :class:`jaxclp.features.SparseFeatures` input (same parameters and initialisation).

    Computes ``X @ kernel + bias`` with :func:`jaxclp.features.matmul` (gather + segment sum, O(nnz * h)),
    never forming the dense (n, d) input. Parameters are ``{"kernel": (d, h), "bias": (h,)}`` with
    ``nn.Dense``'s initialisers, so a parameter tree fits dense and sparse inputs alike.
    """

    features: int
    param_dtype: jnp.dtype = jnp.float32
    use_bias: bool = True
    kernel_init: Callable = nn.initializers.lecun_normal()

    @nn.compact
    def __call__(self, x: SparseFeatures) -> jax.Array:
        kernel = self.param("kernel", self.kernel_init, (x.shape[1], self.features), self.param_dtype)
        if not self.use_bias:
            dtype = jnp.result_type(x.values.dtype, kernel.dtype)
            return matmul(x.astype(dtype), kernel.astype(dtype))
        bias = self.param("bias", nn.initializers.zeros_init(), (self.features,), self.param_dtype)
        dtype = jnp.result_type(x.values.dtype, kernel.dtype, bias.dtype)
        return matmul(x.astype(dtype), kernel.astype(dtype)) + bias.astype(dtype)


class MLP(nn.Module):
    """ReLU MLP with dropout; ``num_layers = len(hidden) + 1`` linear maps (``hidden=()`` is linear).

    The input may be a dense (n, d) array or a :class:`jaxclp.features.SparseFeatures`; for the latter the
    first layer is a :class:`SparseDense` (same parameters, so the two give the same outputs).

    Attributes:
        hidden: widths of the hidden layers (0 to 3 of them in the paper's grids).
        num_classes: K outputs (logits).
        dropout: dropout rate applied to every hidden activation (training only).
    """

    hidden: Sequence[int]
    num_classes: int
    dropout: float = 0.5

    @nn.compact
    def __call__(self, x, *, train: bool) -> jax.Array:
        """(n, d) features (dense or :class:`jaxclp.features.SparseFeatures`) -> (n, K) logits."""
        widths = tuple(self.hidden) + (self.num_classes,)
        for i, width in enumerate(widths):
            layer = SparseDense if (i == 0 and isinstance(x, SparseFeatures)) else nn.Dense
            x = layer(width, name=f"Dense_{i}")(x)  # the names nn.Dense gets automatically
            if i < len(widths) - 1:
                x = nn.relu(x)
                x = nn.Dropout(self.dropout, deterministic=not train)(x)
        return x


class MLPResult(NamedTuple):
    """Output of :func:`fit_mlp`.

    Attributes:
        prior: (n, K) softmax output at the selected parameters (the prior D).
        params: the selected parameters.
        info: :class:`jaxclp.train.TrainInfo`.
    """

    prior: jax.Array
    params: dict
    info: TrainInfo


def fit_mlp(
    key: jax.Array,
    features,
    labels: jax.Array,
    train_mask: jax.Array,
    val_mask: jax.Array,
    *,
    num_classes: int,
    hidden: Sequence[int] = (64,),
    dropout: float = 0.5,
    cfg: TrainConfig = TrainConfig(),
) -> MLPResult:
    """Trains the MLP full-batch (jitted loop, early stopping on validation) and returns the prior D.

    Vmappable over splits: ``jax.vmap(fit_mlp_kernel, ...)`` (see :func:`fit_mlp_splits`).

    Args:
        key: PRNG key (initialisation and dropout).
        features: (n, d) features: a dense array (cast to float32), a scipy.sparse matrix (e.g. CSR from
            ``jaxclp.datasets.load(..., sparse_features=True)``) or a :class:`jaxclp.features.SparseFeatures`.
            Sparse input is never densified: the first layer is ``segment_sum(W[cols] * values, rows)``.
        labels: (n,) int labels; only ``train_mask | val_mask`` entries are read (others may be -1). Those
            must lie in ``[0, num_classes)``.
        train_mask, val_mask: (n,) bool.
        num_classes: K.
        hidden: hidden widths; ``()`` for a linear model.
        dropout: dropout rate.
        cfg: optimiser settings (paper: lr 0.01, wd 5e-5, 500 epochs, patience 50).

    Returns:
        :class:`MLPResult`.

    Raises:
        ValueError: naming the argument: ``features`` not (n, d) / not finite / not numeric, a mask of the
            wrong shape or dtype, an empty ``train_mask``, ``labels`` not integer or a train/val label outside
            ``[0, num_classes)``, ``num_classes`` < 2.
    """
    features = _prepare_features(features)
    n = features.shape[0]
    _checks.mask("train_mask", train_mask, n)
    _checks.mask("val_mask", val_mask, n, nonempty=False)
    _checks.num_classes(num_classes)
    _checks.masked_labels(labels, n, int(num_classes), train_mask, val_mask)
    return _fit_mlp_jit(key, features, labels, train_mask, val_mask,
                        num_classes=int(num_classes), hidden=tuple(hidden), dropout=float(dropout), cfg=cfg)


def _prepare_features(features):
    """Validated float32 features: a dense jax array or :class:`SparseFeatures` (never densified)."""
    features = as_features(features, jnp.float32)
    _checks.features(features)
    return features


def _mlp_model(key, features, *, num_classes, hidden, dropout):
    """``(model, apply_fn, initial params, dropout key)`` of the MLP on ``features`` (keyed as :func:`fit_mlp`)."""
    model, _, init_inputs, apply_fn = _built(mlp_build, (features,),
                                             dict(num_classes=num_classes, hidden=hidden, dropout=dropout))
    init_key, drop_key = jax.random.split(key)
    params = model.init(_init_key(init_key), *init_inputs, train=False)
    return model, apply_fn, params, drop_key


def mlp_build(features, *, num_classes, hidden, dropout):
    """``(model, inputs, init inputs)`` of :func:`fit_mlp` (:func:`jaxclp.train.fit_to_deadline`'s ``build``):
    initialisation reads only the input's width, so a dense (1, d) zero row serves dense and sparse input."""
    model = MLP(hidden=hidden, num_classes=num_classes, dropout=dropout)
    return model, (features,), (jnp.zeros((1, features.shape[1]), features.dtype),)


def fit_mlp_kernel(key, features, labels, train_mask, val_mask, *, num_classes, hidden, dropout, cfg):
    """Unvalidated, jit/vmap-able body of :func:`fit_mlp` (``features`` dense or :class:`SparseFeatures`)."""
    model, apply_fn, params, drop_key = _mlp_model(key, features, num_classes=num_classes, hidden=hidden,
                                                   dropout=dropout)
    best, info = train_full_batch(apply_fn, params, drop_key, labels, train_mask, val_mask, cfg)
    prior = jax.nn.softmax(model.apply(best, features, train=False), axis=-1)
    return MLPResult(prior, best, info)


_fit_mlp_jit = jax.jit(fit_mlp_kernel, static_argnames=("num_classes", "hidden", "dropout", "cfg"))


def fit_mlp_splits(keys, features, labels, train_masks, val_masks, *, num_classes, hidden=(64,),
                   dropout=0.5, cfg=TrainConfig(), deadline: float | None = None,
                   shared_depths: Sequence[int] = ()) -> MLPResult:
    """:func:`fit_mlp` vmapped over S splits: keys (S,), masks (S, n) -> prior (S, n, K).

    ``deadline`` (a :func:`time.perf_counter` time; None: none): training goes in chunks
    (:func:`jaxclp.train.next_chunk`) and stops where the next would end past it or the last one did, and each
    split keeps its best parameters so far
    (``info.epochs_run`` says where it stopped); a fit that ends before the deadline is the fit without one
    (the same epochs and keys, :func:`jaxclp.train.train_until`).

    ``labels`` is (n,) shared, or (S, n) per split (e.g. with each split's test labels set to -1).
    ``features`` as in :func:`fit_mlp` (dense, scipy.sparse or :class:`SparseFeatures`; sparse is shared by
    the splits, not densified). Inputs are validated when concrete, as in :func:`fit_mlp`.

    ``shared_depths`` (e.g. ``(1, 2, 3)``; empty: off): the fits of ``hidden = (w,) * d`` for every ``d`` in it
    share one compiled program (the depth is data: a ``lax.switch`` over the depths' models, each initialised
    and applied as its own MLP); ``hidden`` must be one of them. The same epochs, keys and early stopping as the
    separate fit; the arithmetic is the same up to float rounding where XLA fuses across the switch (priors
    within ~4e-7 of the separate fit's on a 900-node graph).
    """
    features = _prepare_features(features)
    n = features.shape[0]
    if _checks.is_concrete(train_masks, val_masks, labels):
        _checks.num_classes(num_classes)
        tms, vms, ys = np.asarray(train_masks), np.asarray(val_masks), np.asarray(labels)
        _checks.shape("train_masks", tms, (None, n))
        _checks.shape("val_masks", vms, (tms.shape[0], n))
        if ys.ndim == 2:
            _checks.shape("labels", ys, (tms.shape[0], n))
        for s in range(tms.shape[0]):
            _checks.mask(f"train_masks[{s}]", tms[s], n)
            _checks.mask(f"val_masks[{s}]", vms[s], n, nonempty=False)
            _checks.masked_labels(ys[s] if ys.ndim == 2 else ys, n, int(num_classes), tms[s], vms[s],
                                  name="labels" if ys.ndim == 1 else f"labels[{s}]")
    hidden = tuple(int(h) for h in hidden)
    if shared_depths:
        return _fit_mlp_shared_depths(keys, features, labels, train_masks, val_masks, num_classes=int(num_classes),
                                      hidden=hidden, dropout=float(dropout), cfg=cfg, deadline=deadline,
                                      shared_depths=tuple(int(d) for d in shared_depths))
    opts = dict(num_classes=int(num_classes), hidden=hidden, dropout=float(dropout))
    return MLPResult(*fit_splits_to_deadline(mlp_build, opts, keys, (features,), labels, train_masks, val_masks, cfg,
                                             deadline))


def _fit_mlp_shared_depths(keys, features, labels, train_masks, val_masks, *, num_classes, hidden, dropout, cfg,
                           deadline, shared_depths) -> MLPResult:
    """:func:`fit_mlp_splits` of ``hidden`` in the program shared by the depths ``shared_depths``."""
    width = hidden[0] if hidden else None
    if not hidden or hidden != (width,) * len(hidden) or len(hidden) not in shared_depths:
        raise ValueError(f"hidden must be (w,) * d with d in shared_depths={shared_depths}; got {hidden}")
    static = dict(num_classes=num_classes, width=width, depths=shared_depths, dropout=dropout, cfg=cfg)
    index = np.int32(shared_depths.index(len(hidden)))
    blank = blank_state(_mlp_depths_start, keys, features, labels, train_masks, val_masks, key=keys, **static)
    res = fit_in_chunks(lambda state, fresh, until: _mlp_depths_chunk(
        state, fresh, until, index, keys, features, labels, train_masks, val_masks, **static), blank, cfg, deadline)
    return res._replace(params=res.params[int(index)])


def _mlp_depth_models(*, num_classes, width, depths, dropout) -> list:
    """The MLPs of hidden ``(width,) * d`` for each ``d`` in ``depths``."""
    return [MLP(hidden=(width,) * d, num_classes=num_classes, dropout=dropout) for d in depths]


def _mlp_depths_apply(index, features, **arch):
    """``apply_fn(params, key, train)`` of the depth ``depths[index]`` (traced) on the tuple of every depth's
    parameters: a ``lax.switch`` over the depths' own ``MLP.apply`` (one branch runs)."""
    models = _mlp_depth_models(**arch)

    def apply_fn(p, k, train):
        branches = [functools.partial(lambda p, i, m: m.apply(p[i], features, train=train,
                                                                rngs={"dropout": fast_key(k)}), i=i, m=m)
                    for i, m in enumerate(models)]
        return jax.lax.switch(index, branches, p)

    return apply_fn


def _mlp_depths_one_start(key, features, labels, train_mask, val_mask, *, num_classes, width, depths, dropout,
                          cfg) -> dict:
    """The start state of one split of the depth-shared program: every depth's parameters initialised as its own
    MLP's (keyed as :func:`fit_mlp`), in a tuple."""
    arch = dict(num_classes=num_classes, width=width, depths=depths, dropout=dropout)
    init_key, drop_key = jax.random.split(key)
    row = jnp.zeros((1, features.shape[1]), features.dtype)
    params = tuple(m.init(_init_key(init_key), row, train=False) for m in _mlp_depth_models(**arch))
    apply_fn = _mlp_depths_apply(np.int32(0), features, **arch)  # the state's shapes do not depend on the depth
    return train_start(apply_fn, make_optimizer(cfg), params, drop_key, labels, train_mask, val_mask,
                       validation_metric(cfg.metric))


@functools.partial(stored_jit, static_argnames=("num_classes", "width", "depths", "dropout", "cfg"))
def _mlp_depths_chunk(state, fresh, until, index, keys, features, labels, train_masks, val_masks, *, num_classes,
                      width, depths, dropout, cfg):
    """A chunk of :func:`fit_mlp_splits` (``jaxclp.train``'s chunk vmapped over the splits) of the depth
    ``depths[index]`` (traced) in the program every depth of ``depths`` shares; the outcome's ``params`` hold every depth's tree (the chosen depth's trained)."""
    arch = dict(num_classes=num_classes, width=width, depths=depths, dropout=dropout)
    apply_fn = _mlp_depths_apply(index, features, **arch)

    def one(s, key, y, tm, vm):
        start = lambda: _mlp_depths_one_start(key, features, y, tm, vm, cfg=cfg, **arch)
        s = train_chunk(apply_fn, start, fresh, until, s, y, tm, vm, cfg)
        best, info = train_outcome(s)
        return s, MLPResult(jax.nn.softmax(apply_fn(best, s["eval_key"], False), axis=-1), best, info)

    return jax.vmap(one, in_axes=(0, 0, _label_axis(labels), 0, 0))(state, keys, labels, train_masks, val_masks)


def _mlp_depths_start(keys, features, labels, train_masks, val_masks, *, num_classes, width, depths, dropout,
                      cfg) -> dict:
    """:func:`_mlp_depths_one_start` vmapped over the splits (the shape of :func:`_mlp_depths_chunk`'s state)."""
    one = functools.partial(_mlp_depths_one_start, num_classes=num_classes, width=width, depths=depths,
                            dropout=dropout, cfg=cfg)
    return jax.vmap(one, in_axes=(0, None, _label_axis(labels), 0, 0))(keys, features, labels, train_masks,
                                                                         val_masks)


MLP_CHUNK_EPOCHS = DEADLINE_EPOCHS
"""Epochs of :func:`fit_mlp_splits`' first chunk under a ``deadline`` (:data:`jaxclp.train.DEADLINE_EPOCHS`; the
later chunks are :func:`jaxclp.train.next_chunk`'s: half the time left at the measured rate)."""


def mlp_param_count(num_features: int, num_classes: int, hidden: Sequence[int] = (64,)) -> int:
    """Number of parameters of the MLP."""
    model = MLP(hidden=tuple(hidden), num_classes=num_classes)
    params = jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros((1, num_features)), train=False))
    return count_params(params)
