"""The base predictor: a flax MLP on node features only (method step 1)."""

from __future__ import annotations

import functools
from typing import NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxclp import _checks
from jaxclp.train import TrainConfig, TrainInfo, count_params, train_full_batch


class MLP(nn.Module):
    """ReLU MLP with dropout; ``num_layers = len(hidden) + 1`` linear maps (``hidden=()`` is linear).

    Attributes:
        hidden: widths of the hidden layers (0 to 3 of them in the paper's grids).
        num_classes: K outputs (logits).
        dropout: dropout rate applied to every hidden activation (training only).
    """

    hidden: Sequence[int]
    num_classes: int
    dropout: float = 0.5

    @nn.compact
    def __call__(self, x: jax.Array, *, train: bool) -> jax.Array:
        """(n, d) features -> (n, K) logits."""
        for width in self.hidden:
            x = nn.relu(nn.Dense(width)(x))
            x = nn.Dropout(self.dropout, deterministic=not train)(x)
        return nn.Dense(self.num_classes)(x)


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
    features: jax.Array,
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
        features: (n, d) float features.
        labels: (n,) int labels; only ``train_mask | val_mask`` entries are read (others may be -1).
        train_mask, val_mask: (n,) bool.
        num_classes: K.
        hidden: hidden widths; ``()`` for a linear model.
        dropout: dropout rate.
        cfg: optimiser settings (paper: lr 0.01, wd 5e-5, 500 epochs, patience 50).

    Returns:
        :class:`MLPResult`.
    """
    n = features.shape[0]
    _checks.shape("features", features, (n, None))
    _checks.finite("features", features)
    _checks.mask("train_mask", train_mask, n)
    _checks.mask("val_mask", val_mask, n, nonempty=False)
    _checks.shape("labels", labels, (n,))
    return _fit_mlp_jit(key, jnp.asarray(features, jnp.float32), labels, train_mask, val_mask,
                        num_classes=int(num_classes), hidden=tuple(hidden), dropout=float(dropout), cfg=cfg)


def fit_mlp_kernel(key, features, labels, train_mask, val_mask, *, num_classes, hidden, dropout, cfg):
    """Unvalidated, jit/vmap-able body of :func:`fit_mlp`."""
    model = MLP(hidden=hidden, num_classes=num_classes, dropout=dropout)
    init_key, drop_key = jax.random.split(key)
    params = model.init(init_key, features[:1], train=False)

    def apply_fn(p, k, train):
        return model.apply(p, features, train=train, rngs={"dropout": k})

    best, info = train_full_batch(apply_fn, params, drop_key, labels, train_mask, val_mask, cfg)
    prior = jax.nn.softmax(model.apply(best, features, train=False), axis=-1)
    return MLPResult(prior, best, info)


_fit_mlp_jit = jax.jit(fit_mlp_kernel, static_argnames=("num_classes", "hidden", "dropout", "cfg"))


@functools.partial(jax.jit, static_argnames=("num_classes", "hidden", "dropout", "cfg"))
def fit_mlp_splits(keys, features, labels, train_masks, val_masks, *, num_classes, hidden=(64,),
                   dropout=0.5, cfg=TrainConfig()) -> MLPResult:
    """:func:`fit_mlp` vmapped over S splits: keys (S,), masks (S, n) -> prior (S, n, K).

    ``labels`` is (n,) shared, or (S, n) per split (e.g. with each split's test labels set to -1).
    """
    f = functools.partial(fit_mlp_kernel, num_classes=num_classes, hidden=hidden, dropout=dropout, cfg=cfg)
    label_axis = 0 if labels.ndim == 2 else None
    return jax.vmap(f, in_axes=(0, None, label_axis, 0, 0))(keys, features, labels, train_masks, val_masks)


def mlp_param_count(num_features: int, num_classes: int, hidden: Sequence[int] = (64,)) -> int:
    """Number of parameters of the MLP."""
    model = MLP(hidden=tuple(hidden), num_classes=num_classes)
    params = jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros((1, num_features)), train=False))
    return count_params(params)
