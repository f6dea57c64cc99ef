"""Full-batch training with optax and validation early stopping, the whole loop in one ``lax.while_loop``.

Shared by the MLP base predictor, LINK and the GNN baselines. Every function is pure: PRNG keys are
explicit, the loop is jitted, and the whole trainer can be ``jax.vmap``-ed over splits (masks and keys).
"""

from __future__ import annotations

import functools
import math
import time
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxclp import _checks
from jaxclp._rng import fast_key, init_key as _init_key
from jaxclp.metrics import masked_accuracy, roc_auc
from jaxclp.program_store import stored_jit


class TrainConfig(NamedTuple):
    """Optimisation settings (paper defaults).

    Attributes:
        lr: learning rate.
        weight_decay: L2 strength.
        epochs: maximal number of full-batch epochs.
        patience: stop after this many epochs without validation improvement (0 disables early stopping).
        optimizer: "adam" (L2 added to the gradient, as ``torch.optim.Adam(weight_decay=...)`` in the
            paper's code) or "adamw" (decoupled decay).
        metric: validation metric for early stopping and best-epoch selection: "accuracy" or "roc_auc"
            (binary tasks; scored on the softmax probability of class 1). Pass the task's metric
            (``dataset.metric``) so that every trained model is selected on what it is evaluated on.
    """

    lr: float = 0.01
    weight_decay: float = 5e-5
    epochs: int = 500
    patience: int = 50
    optimizer: str = "adam"
    metric: str = "accuracy"


class TrainInfo(NamedTuple):
    """Diagnostics of :func:`train_full_batch` (scalars; batched when vmapped).

    Attributes:
        best_epoch: epoch (0-based) of the returned parameters.
        epochs_run: epochs actually run.
        best_val_accuracy: validation accuracy of the returned parameters.
        best_val_loss: validation loss of the returned parameters.
        final_train_loss: training loss at the last epoch.
        best_val_metric: validation value of ``TrainConfig.metric`` (the selection criterion) of the
            returned parameters.
    """

    best_epoch: jax.Array
    epochs_run: jax.Array
    best_val_accuracy: jax.Array
    best_val_loss: jax.Array
    final_train_loss: jax.Array
    best_val_metric: jax.Array


def make_optimizer(cfg: TrainConfig) -> optax.GradientTransformation:
    if cfg.optimizer == "adam":
        return optax.chain(optax.add_decayed_weights(cfg.weight_decay), optax.adam(cfg.lr))
    if cfg.optimizer == "adamw":
        return optax.adamw(cfg.lr, weight_decay=cfg.weight_decay)
    raise ValueError(f"optimizer must be 'adam' or 'adamw'; got {cfg.optimizer!r}")


def masked_cross_entropy(logits: jax.Array, labels: jax.Array, mask: jax.Array) -> jax.Array:
    """Mean softmax cross-entropy over ``mask`` (labels outside the mask are never read)."""
    safe = jnp.where(mask, labels, 0)
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, safe)
    return jnp.sum(jnp.where(mask, ce, 0.0)) / jnp.maximum(jnp.sum(mask), 1)


def train_full_batch(
    apply_fn: Callable,
    params,
    key: jax.Array,
    labels: jax.Array,
    train_mask: jax.Array,
    val_mask: jax.Array,
    cfg: TrainConfig = TrainConfig(),
):
    """Trains ``params`` full-batch; returns the parameters with the best validation ``cfg.metric``.

    "Best" is the highest validation metric (accuracy, or ROC-AUC of the class-1 softmax probability when
    ``cfg.metric == "roc_auc"``), ties broken by lower validation loss; an undefined AUC (one class in the
    validation mask) counts as ``-inf`` so the loss decides. Training stops once ``cfg.patience`` epochs pass
    without improvement. Labels outside ``train_mask | val_mask`` are never read.

    Args:
        apply_fn: ``apply_fn(params, key, train: bool) -> (n, K) logits`` (dropout keyed by ``key``).
        params: initial parameter pytree.
        key: PRNG key for dropout.
        labels: (n,) int labels.
        train_mask, val_mask: (n,) bool.
        cfg: :class:`TrainConfig`.

    Returns:
        ``(best_params, TrainInfo)``.
    """
    opt = make_optimizer(cfg)
    score = validation_metric(cfg.metric)
    return _train(apply_fn, opt, cfg.epochs, cfg.patience, params, key, labels, train_mask, val_mask, score)


def validation_metric(metric: str) -> Callable:
    """``f(logits, labels, mask) -> ()`` for ``metric`` in {"accuracy", "roc_auc"} (jit-able).

    ROC-AUC is computed on the softmax probability of class 1 (the logits of a 2-class model are not
    monotone in it); NaN (a single class under ``mask``) is mapped to ``-inf``.
    """
    if metric == "accuracy":
        return masked_accuracy
    if metric == "roc_auc":
        def auc(logits, labels, mask):
            if logits.shape[-1] != 2:
                raise ValueError(f"metric 'roc_auc' needs 2 classes; logits have shape {logits.shape}")
            v = roc_auc(jax.nn.softmax(logits, axis=-1), labels, mask)
            return jnp.where(jnp.isnan(v), -jnp.inf, v)

        return auc
    raise ValueError(f"metric must be 'accuracy' or 'roc_auc'; got {metric!r}")


def _train(apply_fn, opt, epochs, patience, params, key, labels, train_mask, val_mask, score=masked_accuracy):
    state = train_start(apply_fn, opt, params, key, labels, train_mask, val_mask, score)
    state = train_until(apply_fn, opt, epochs, patience, state, labels, train_mask, val_mask, score)
    return train_outcome(state)


def train_start(apply_fn, opt, params, key, labels, train_mask, val_mask, score=masked_accuracy) -> dict:
    """The state of :func:`train_full_batch`'s loop before its first epoch (a pytree of arrays: parameters, optimizer
    state, best parameters so far and their validation scores, epoch and patience counters, dropout key, and
    whether the current parameters are evaluated yet: the initial ones are evaluated by the loop's first pass).

    :func:`train_until` runs epochs on it; ``train_until(..., epochs, ...)`` on ``train_start(...)`` is
    :func:`train_full_batch`'s loop, and running it in steps (``until`` = 50, then 100, ...) takes the same
    epochs with the same keys: a fit resumed at a rung is the fit run at once (successive halving,
    :func:`jaxclp.gnn.fit_gnn_grid`'s ``rungs``). Arguments as :func:`train_full_batch`'s, ``opt`` and ``score``
    made (:func:`make_optimizer`, :func:`validation_metric`).
    """
    labels = jnp.where(train_mask | val_mask, labels, 0)
    m, vloss, acc = jax.eval_shape(lambda p: _evaluate(apply_fn, p, key, labels, val_mask, score), params)
    return dict(params=params, opt=opt.init(params), best=params, best_m=jnp.full(m.shape, -jnp.inf, m.dtype),
                best_loss=jnp.full(vloss.shape, jnp.inf, vloss.dtype), best_acc=jnp.zeros(acc.shape, acc.dtype),
                best_epoch=jnp.int32(-1), bad=jnp.int32(0), epoch=jnp.int32(0), key=key,
                train_loss=jnp.full(vloss.shape, jnp.inf, vloss.dtype), eval_key=key, evaluated=jnp.bool_(False))


def _evaluate(apply_fn, p, key, labels, val_mask, score):
    logits = apply_fn(p, key, False)
    return (score(logits, labels, val_mask), masked_cross_entropy(logits, labels, val_mask),
            masked_accuracy(logits, labels, val_mask))


def _evaluate_and_grad(apply_fn, p, eval_key, train_key, labels, train_mask, val_mask, score):
    """The validation scores of ``p`` (:func:`_evaluate`) and the training loss and gradients at ``p`` (dropout
    keyed by ``train_key``), in one computation: the two forward passes share their dropout-free head (a model's
    input projection ``x W``, the largest product of a feature-rich graph), which XLA computes once."""
    m, vloss, acc = _evaluate(apply_fn, p, eval_key, labels, val_mask, score)
    loss, grads = jax.value_and_grad(lambda q: masked_cross_entropy(apply_fn(q, train_key, True), labels,
                                                                    train_mask))(p)
    return m, vloss, acc, loss, grads


def train_until(apply_fn, opt, until, patience, state: dict, labels, train_mask, val_mask,
                score=masked_accuracy) -> dict:
    """Runs the epochs of :func:`train_start`'s ``state`` up to epoch ``until`` (a Python int or a traced int32;
    exclusive, as ``TrainConfig.epochs``), or until ``patience`` epochs pass without a better validation score
    (0: never); returns the new state (:func:`train_outcome` reads it). A state already past ``until`` or already
    stopped is returned unchanged.

    Each pass of the loop evaluates the current parameters and differentiates the training loss at them in one
    computation (:func:`_evaluate_and_grad`: their shared input projection computed once), records the
    evaluation, and then takes the optimizer step unless ``until`` is reached or patience ran out. So ``E`` epochs
    are ``E + 1`` passes whose last step is not taken (one gradient more than the textbook loop, which steps and
    then evaluates in two computations), and a state resumed at a chunk's end evaluates its parameters once more
    without recording it again: the same fit, whatever the chunks."""
    labels = jnp.where(train_mask | val_mask, labels, 0)

    def out_of_patience(bad):
        return (patience > 0) & (bad >= patience)

    def cond(s):
        return ~s["evaluated"] | ((s["epoch"] < until) & ~out_of_patience(s["bad"]))

    def body(s):
        key, sub = jax.random.split(s["key"])
        m, vloss, acc, loss, grads = _evaluate_and_grad(apply_fn, s["params"], s["eval_key"], sub, labels,
                                                        train_mask, val_mask, score)
        fresh = ~s["evaluated"]  # an evaluation not recorded yet (a resumed state's parameters are)
        better = fresh & ((s["epoch"] == 0) | (m > s["best_m"]) | ((m == s["best_m"]) & (vloss < s["best_loss"])))
        keep = lambda new, old: jax.tree_util.tree_map(lambda a, b: jnp.where(better, a, b), new, old)
        bad = jnp.where(better, 0, jnp.where(fresh, s["bad"] + 1, s["bad"]))
        step = (s["epoch"] < until) & ~out_of_patience(bad)
        updates, opt_state = opt.update(grads, s["opt"], s["params"])
        take = lambda new, old: jax.tree_util.tree_map(lambda a, b: jnp.where(step, a, b), new, old)
        return dict(params=take(optax.apply_updates(s["params"], updates), s["params"]),
                    opt=take(opt_state, s["opt"]), best=keep(s["params"], s["best"]),
                    best_m=jnp.where(better, m, s["best_m"]), best_acc=jnp.where(better, acc, s["best_acc"]),
                    best_loss=jnp.where(better, vloss, s["best_loss"]),
                    best_epoch=jnp.where(better, s["epoch"] - 1, s["best_epoch"]), bad=bad,
                    epoch=s["epoch"] + step.astype(jnp.int32), key=jnp.where(step, key, s["key"]),
                    train_loss=jnp.where(step, loss, s["train_loss"]), eval_key=s["eval_key"], evaluated=~step)

    return jax.lax.while_loop(cond, body, state)


def train_stopped(state: dict, patience: int):
    """Whether early stopping ended the fit of ``state`` (``patience`` epochs without improvement; bool scalar)."""
    bad = state["bad"]
    if _checks.is_concrete(bad):  # the deadline loops ask between chunks: host arithmetic, no program
        return (patience > 0) & (np.asarray(bad) >= patience)
    return (patience > 0) & (bad >= patience)


def stopped_early(info: TrainInfo, patience: int):
    """Whether early stopping ended the fit :func:`train_outcome` described in ``info`` (:func:`train_stopped`'s
    condition read from the returned diagnostics: the epochs after the best one, ``epochs_run - 1 - best_epoch``,
    are the loop's count of epochs without improvement); bool, batched as ``info`` is."""
    xp = np if _checks.is_concrete(info.epochs_run, info.best_epoch) else jnp  # host arithmetic: no program
    return (patience > 0) & (xp.asarray(info.epochs_run) - 1 - xp.asarray(info.best_epoch) >= patience)


def train_outcome(state: dict):
    """``(best_params, TrainInfo)`` of a :func:`train_until` state, as :func:`train_full_batch` returns them."""
    s = state
    info = TrainInfo(best_epoch=s["best_epoch"], epochs_run=s["epoch"], best_val_accuracy=s["best_acc"],
                     best_val_loss=s["best_loss"], final_train_loss=s["train_loss"],
                     best_val_metric=s["best_m"])
    return s["best"], info


def count_params(params) -> int:
    """Number of scalar parameters in a pytree."""
    return int(sum(x.size for x in jax.tree_util.tree_leaves(params)))


# ------------------------------------------------------------------------------------- training to a deadline
DEADLINE_EPOCHS = 25
"""The first chunk's epochs when a fit trains to a ``deadline`` (:func:`fit_to_deadline`,
:func:`jaxclp.gnn.fit_gnn_grid`), and the fewest of any chunk; each later chunk is sized by :func:`next_chunk`."""


def next_chunk(done: int, seconds_per_epoch: float | None, deadline: float, now: float) -> int:
    """Epochs of a deadline-bound fit's next chunk, after ``done`` epochs: :data:`DEADLINE_EPOCHS` first (its
    seconds, compilation included, are the cautious rate), then as many as half the time left holds at the last
    chunk's rate (at least :data:`DEADLINE_EPOCHS`), so the clock is read often only near the deadline and a far
    one (``math.inf``: the runner's later splits) costs one chunk: no look at the clock per 25 epochs on small
    graphs, where each look costs as much as the epochs. 0 (stop: the fit keeps its best parameters so far) once
    :data:`DEADLINE_EPOCHS` epochs at that rate would end past the deadline: a fit then ends before the deadline
    rather than up to one chunk after it (a GCN's 25 epochs on an arxiv-sized graph take over 10 s)."""
    left = deadline - now
    if not math.isfinite(left):
        return 1 << 30
    if seconds_per_epoch is None:
        return DEADLINE_EPOCHS
    if left < DEADLINE_EPOCHS * seconds_per_epoch:
        return 0
    return max(DEADLINE_EPOCHS, int(0.5 * left / max(seconds_per_epoch, 1e-9)))

_STEP_STATIC = ("build", "opts", "cfg")


def _built(build, data, opts):
    """``(model, inputs, apply_fn)`` of ``build(*data, **opts)`` (a flax module, its positional inputs and the
    inputs it is initialised on): ``apply_fn(p, k, train)`` as every jaxclp fit applies its model."""
    model, inputs, init_inputs = build(*data, **dict(opts))

    def apply_fn(p, k, train):
        # dropout masks through jaxclp's key type: JAX's bits, hashed ~10x faster on CPU (jaxclp/_rng.py)
        return model.apply(p, *inputs, train=train, rngs={"dropout": fast_key(k)})

    return model, inputs, init_inputs, apply_fn


def _step_start(key, data, labels, train_mask, val_mask, build, opts, cfg) -> dict:
    """:func:`train_start`'s state of the model ``build`` makes, keyed as every jaxclp fit
    (``jax.random.split(key)`` into the initialisation and dropout keys)."""
    model, _, init_inputs, apply_fn = _built(build, data, opts)
    init_key, drop_key = jax.random.split(key)
    params = model.init(_init_key(init_key), *init_inputs, train=False)
    return train_start(apply_fn, make_optimizer(cfg), params, drop_key, labels, train_mask, val_mask,
                       validation_metric(cfg.metric))


def _chunk(state, fresh, until, key, data, labels, train_mask, val_mask, build, opts, cfg):
    """One chunk of the fit of the model ``build`` makes (:func:`train_chunk`) and the outcome so far: ``(state,
    (softmax (n, K) at the best parameters, best parameters, TrainInfo))``."""
    model, inputs, _, apply_fn = _built(build, data, opts)
    start = lambda: _step_start(key, data, labels, train_mask, val_mask, build, opts, cfg)
    state = train_chunk(apply_fn, start, fresh, until, state, labels, train_mask, val_mask, cfg)
    best, info = train_outcome(state)
    return state, (jax.nn.softmax(model.apply(best, *inputs, train=False), axis=-1), best, info)


@functools.partial(stored_jit, static_argnames=_STEP_STATIC)
def _step_chunk(state, fresh, until, key, data, labels, train_mask, val_mask, *, build, opts, cfg):
    """:func:`_chunk` of :func:`fit_to_deadline`: one program for every chunk and for a fit without a deadline (one
    chunk)."""
    return _chunk(state, fresh, until, key, data, labels, train_mask, val_mask, build, opts, cfg)


def _label_axis(labels):
    """The vmap axis of ``labels``: 0 for (S, n) per-split labels, None for (n,) shared ones."""
    return 0 if labels.ndim == 2 else None


def _splits_start(keys, data, labels, train_masks, val_masks, build, opts, cfg) -> dict:
    """:func:`_step_start` vmapped over the splits (``data`` shared)."""
    one = lambda k, y, tm, vm: _step_start(k, data, y, tm, vm, build, opts, cfg)
    return jax.vmap(one, in_axes=(0, _label_axis(labels), 0, 0))(keys, labels, train_masks, val_masks)


@functools.partial(stored_jit, static_argnames=_STEP_STATIC)
def _splits_chunk(state, fresh, until, keys, data, labels, train_masks, val_masks, *, build, opts, cfg):
    """:func:`_chunk` vmapped over the splits (``data`` shared) for :func:`fit_splits_to_deadline`."""
    one = lambda s, k, y, tm, vm: _chunk(s, fresh, until, k, data, y, tm, vm, build, opts, cfg)
    return jax.vmap(one, in_axes=(0, 0, _label_axis(labels), 0, 0))(state, keys, labels, train_masks, val_masks)


def train_chunk(apply_fn, start: Callable[[], dict], fresh, until, state: dict, labels, train_mask, val_mask,
                cfg: TrainConfig) -> dict:
    """The traceable step of a fit in chunks: the state :func:`train_start` makes (``start()``, only where
    ``fresh``, a traced bool: one program serves the first chunk and the later ones) or ``state``, then
    :func:`train_until` epoch ``min(until, cfg.epochs)``. ``state`` is a :func:`blank_state` where ``fresh``.
    One chunk to ``cfg.epochs`` is :func:`train_full_batch`'s fit, bit for bit."""
    state = jax.lax.cond(fresh, start, lambda: state)
    return train_until(apply_fn, make_optimizer(cfg), jnp.minimum(until, cfg.epochs), cfg.patience, state, labels,
                       train_mask, val_mask, validation_metric(cfg.metric))


@functools.lru_cache(maxsize=64)
def _shapes_of(start: Callable, static: tuple[str, ...]) -> Callable:
    """``start`` jitted with its keyword arguments ``static``: its ``eval_shape`` traces once per input shapes and
    static values (as a call would compile once), where ``jax.eval_shape`` of a new partial traces every time."""
    return stored_jit(start, static_argnames=static)


def blank_state(start: Callable, *args, key: jax.Array, **kwargs) -> dict:
    """Host zeros shaped as the state ``start(*args, **kwargs)`` makes (traced abstractly, nothing computed), its
    PRNG key leaves ``key`` (of their shape): the ``state`` of a first :func:`train_chunk`, which ignores it.
    ``kwargs`` are static (hashable: the chunk program's own static arguments)."""
    shapes = _shapes_of(start, tuple(sorted(kwargs))).eval_shape(*args, **kwargs)
    return jax.tree_util.tree_map(
        lambda s: key if jnp.issubdtype(s.dtype, jax.dtypes.prng_key) else np.zeros(s.shape, s.dtype), shapes)


def fit_in_chunks(call: Callable, blank: dict, cfg: TrainConfig, deadline: float | None):
    """Drives a fit in chunks to ``deadline`` and returns its outcome.

    ``call(state, fresh, until) -> (state, outcome)`` runs one chunk (a program around :func:`train_chunk`:
    ``fresh`` a numpy bool, ``until`` a numpy int32). Chunks are :func:`next_chunk`'s (:data:`DEADLINE_EPOCHS`
    epochs first, then half the time left at the measured rate); training stops where the next chunk would end
    past ``deadline`` (a :func:`time.perf_counter` time) or the last one did, or where every fit of a batched
    state stopped early. ``deadline`` None: one chunk to ``cfg.epochs``, the fit without a deadline. A fit that
    ends before the deadline is the fit without one (the same epochs with the same keys, :func:`train_until`).
    """
    if deadline is None:
        return call(blank, np.bool_(True), np.int32(cfg.epochs))[1]
    t = time.perf_counter()
    state, fresh, done, rate, out = blank, True, 0, None, None
    while done < cfg.epochs and (chunk := next_chunk(done, rate, deadline, t)):
        until = min(done + chunk, cfg.epochs)
        state, out = call(state, np.bool_(fresh), np.int32(until))
        fresh = False
        stopped = bool(np.all(train_stopped(state, cfg.patience)))  # waits for the chunk
        now = time.perf_counter()
        rate, done, t = (now - t) / (until - done), until, now
        if stopped or now > deadline:
            break
    if out is None:  # no epoch to run (cfg.epochs 0): the initial parameters, evaluated
        out = call(state, np.bool_(fresh), np.int32(0))[1]
    return out


def fit_to_deadline(build: Callable, opts: dict, key: jax.Array, data: tuple, labels, train_mask, val_mask,
                    cfg: TrainConfig, deadline: float | None):
    """Trains the model ``build`` makes as jaxclp's fits do (``jax.random.split(key)`` into the initialisation and
    dropout keys, :func:`train_full_batch`'s loop), in chunks (:func:`next_chunk`: :data:`DEADLINE_EPOCHS` epochs
    first, then half the time left at the measured rate), and stops with the best parameters so far where the
    next chunk would end past ``deadline`` (a :func:`time.perf_counter` time) or the last one did. A fit that
    ends before the deadline is the fit without one (the same epochs with the same keys, :func:`train_until`).

    Args:
        build: ``build(*data, **opts) -> (module, inputs, init_inputs)`` (traceable; static under jit, so pass a
            module-level function): the flax module, the positional inputs of its ``apply`` and those of its
            ``init``.
        opts: its static keyword options (hashable values).
        key: PRNG key of the fit.
        data: the arrays ``build`` takes (graphs, features: pytrees).
        labels, train_mask, val_mask: as :func:`train_full_batch`.
        cfg: :class:`TrainConfig` (static).
        deadline: the time where training stops; None: none (the whole fit in one chunk, one program either way:
            :func:`fit_in_chunks`).

    Returns:
        ``(softmax (n, K) at the best parameters, best parameters, TrainInfo)``; ``info.epochs_run`` says where
        training stopped (:func:`stopped_at`).
    """
    static = dict(build=build, opts=tuple(sorted(opts.items())), cfg=cfg)
    blank = blank_state(_step_start, key, data, labels, train_mask, val_mask, key=key, **static)
    return fit_in_chunks(lambda state, fresh, until: _step_chunk(state, fresh, until, key, data, labels, train_mask,
                                                                 val_mask, **static), blank, cfg, deadline)


def fit_splits_to_deadline(build: Callable, opts: dict, keys: jax.Array, data: tuple, labels, train_masks,
                           val_masks, cfg: TrainConfig, deadline: float | None):
    """:func:`fit_to_deadline` vmapped over S splits in one program: ``keys`` (S,), masks (S, n), ``labels`` (n,)
    shared or (S, n) per split, ``data`` shared; the chunks and the stop as :func:`fit_in_chunks` (it stops early
    where every split did). Returns ``(softmax (S, n, K), best parameters, TrainInfo)``, batched."""
    static = dict(build=build, opts=tuple(sorted(opts.items())), cfg=cfg)
    blank = blank_state(_splits_start, keys, data, labels, train_masks, val_masks, key=keys, **static)
    return fit_in_chunks(lambda state, fresh, until: _splits_chunk(state, fresh, until, keys, data, labels,
                                                                   train_masks, val_masks, **static),
                         blank, cfg, deadline)


def stopped_at(infos, cfg: TrainConfig) -> int | None:
    """The epoch where a deadline stopped a fit (one :class:`TrainInfo`) or a grid of fits (several: halving's cut
    specs run fewer epochs than the one that went on), else None: the most epochs any fit ran, where a fit that
    ran them neither stopped early nor reached ``cfg.epochs``."""
    infos = [infos] if isinstance(infos, TrainInfo) else list(infos)
    last = max(int(i.epochs_run) for i in infos)
    cut = last < cfg.epochs and any(int(i.epochs_run) == last and not bool(stopped_early(i, cfg.patience))
                                    for i in infos)
    return last if cut else None
