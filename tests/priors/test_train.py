"""Early stopping / best-epoch selection on the task metric (jaxclp.train)."""

import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from files import compiled_programs
from jaxclp._rng import init_key as init_key_of
from jaxclp.train import DEADLINE_EPOCHS, TrainConfig, fit_to_deadline, train_full_batch, validation_metric

# A one-parameter "model" whose trajectory is known: one training node (label 1) with logit margin
# 0.01 * theta, so the training-loss gradient in theta is negative and nearly constant and Adam moves theta
# up by ~lr every epoch. Ten validation nodes, 9 negatives and 1 positive (imbalanced), with margins
#   positive: theta - 3,   negative j: -1 - 0.1 j + 0.5 theta   (j = 0..8).
# For theta < 2 every negative is right and the positive wrong: accuracy 0.9 (the best possible), AUC 0.
# For theta > 4 the positive ranks above every negative (AUC 1) but all 9 negatives are wrong (accuracy 0.1).
N_VAL_NEG = 9
C = -1.0 - 0.1 * jnp.arange(N_VAL_NEG)
LABELS = jnp.array([1] + [1] + [0] * N_VAL_NEG)          # node 0: train; node 1: val positive; rest: val neg
TRAIN = jnp.zeros(11, bool).at[0].set(True)
VAL = ~TRAIN


def _margins(theta):
    return jnp.concatenate([jnp.array([0.01 * theta, theta - 3.0]), C + 0.5 * theta])


def _apply(params, _key, _train):
    d = _margins(params["theta"])
    return jnp.stack([jnp.zeros_like(d), d], axis=-1)


def _np_auc(d_pos, d_neg):
    return float(np.mean((d_pos > d_neg) + 0.5 * (d_pos == d_neg)))


def _fit(metric):
    cfg = TrainConfig(lr=0.25, weight_decay=0.0, epochs=40, patience=0, metric=metric)
    params = {"theta": jnp.asarray(0.0)}
    return train_full_batch(_apply, params, jax.random.PRNGKey(0), LABELS, TRAIN, VAL, cfg)


def test_auc_early_stopping_picks_a_better_auc_epoch_than_accuracy():
    p_acc, info_acc = _fit("accuracy")
    p_auc, info_auc = _fit("roc_auc")
    th_acc, th_auc = float(p_acc["theta"]), float(p_auc["theta"])
    # accuracy selection stays in the "all negative" regime, AUC selection leaves it
    assert th_acc < 2.0 < 4.0 < th_auc
    assert int(info_acc.best_epoch) != int(info_auc.best_epoch)
    assert int(info_auc.best_epoch) > int(info_acc.best_epoch)
    # the recorded selection values against a numpy reference at the returned parameters
    for th, info in ((th_acc, info_acc), (th_auc, info_auc)):
        d = np.asarray(_margins(th))
        acc = float(np.mean(np.r_[d[1] > 0, d[2:] <= 0]))
        assert float(info.best_val_accuracy) == pytest.approx(acc)
    assert float(info_auc.best_val_metric) == pytest.approx(_np_auc(np.asarray(_margins(th_auc))[1],
                                                                    np.asarray(_margins(th_auc))[2:]))
    assert _np_auc(np.asarray(_margins(th_acc))[1], np.asarray(_margins(th_acc))[2:]) == 0.0
    assert float(info_acc.best_val_metric) == pytest.approx(0.9)
    assert float(info_auc.best_val_metric) == pytest.approx(1.0)
    assert float(info_auc.best_val_accuracy) == pytest.approx(0.1)


def test_auc_selection_is_vmappable_over_splits():
    cfg = TrainConfig(lr=0.25, weight_decay=0.0, epochs=40, patience=0, metric="roc_auc")

    def one(key, tm, vm):
        return train_full_batch(_apply, {"theta": jnp.asarray(0.0)}, key, LABELS, tm, vm, cfg)[1].best_val_metric

    keys = jax.random.split(jax.random.PRNGKey(1), 2)
    out = jax.jit(jax.vmap(one))(keys, jnp.stack([TRAIN, TRAIN]), jnp.stack([VAL, VAL]))
    np.testing.assert_allclose(np.asarray(out), [1.0, 1.0])


def test_auc_matches_sklearn_on_softmax_scores():
    sk = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    logits = jnp.asarray(rng.normal(size=(50, 2)))
    labels = jnp.asarray(rng.integers(0, 2, 50))
    mask = jnp.asarray(rng.random(50) < 0.6)
    got = float(validation_metric("roc_auc")(logits, labels, mask))
    p = np.asarray(jax.nn.softmax(logits, -1))[:, 1]
    m = np.asarray(mask)
    assert got == pytest.approx(sk.roc_auc_score(np.asarray(labels)[m], p[m]))


def test_undefined_auc_falls_back_to_loss_and_bad_metric_raises():
    f = validation_metric("roc_auc")
    only_neg = jnp.array([False, False] + [True] * N_VAL_NEG)
    v = f(_apply({"theta": jnp.asarray(1.0)}, None, False), LABELS, only_neg)
    assert float(v) == -np.inf
    with pytest.raises(ValueError, match="metric"):
        validation_metric("f1")
    with pytest.raises(ValueError, match="metric"):
        train_full_batch(_apply, {"theta": jnp.asarray(0.0)}, jax.random.PRNGKey(0), LABELS, TRAIN, VAL,
                         TrainConfig(metric="auc"))
    with pytest.raises(ValueError, match="2 classes"):
        f(jnp.zeros((11, 3)), LABELS, VAL)


def test_training_resumed_at_rungs_is_the_training_run_at_once():
    """train_start + train_until in steps (10, then 25, then to the end) takes the same epochs with the same keys as
    train_full_batch: the same best parameters and diagnostics bit for bit; a state past ``until`` is unchanged,
    and one early-stopped stays stopped (train_stopped, and stopped_early from the diagnostics alone)."""
    from jaxclp.train import make_optimizer, stopped_early, train_outcome, train_start, train_stopped, train_until

    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(30, 4)), jnp.float32)
    labels = jnp.asarray(rng.integers(0, 3, 30))
    train, val = jnp.arange(30) < 12, (jnp.arange(30) >= 12) & (jnp.arange(30) < 22)

    def apply(p, key, is_train):
        h = x @ p["w"]
        keep = jax.random.bernoulli(key, 0.8, h.shape)
        return jnp.where(is_train, jnp.where(keep, h / 0.8, 0.0), h)

    params = {"w": jnp.asarray(rng.normal(size=(4, 3)), jnp.float32)}
    cfg = TrainConfig(lr=0.05, weight_decay=1e-3, epochs=60, patience=8)
    key = jax.random.key(5)
    ref_p, ref_info = train_full_batch(apply, params, key, labels, train, val, cfg)
    opt, score = make_optimizer(cfg), validation_metric(cfg.metric)
    state = train_start(apply, opt, params, key, labels, train, val, score)
    for until in (10, 25, cfg.epochs):
        state = train_until(apply, opt, until, cfg.patience, state, labels, train, val, score)
        assert int(state["epoch"]) <= until
    p, info = train_outcome(state)
    np.testing.assert_array_equal(np.asarray(p["w"]), np.asarray(ref_p["w"]))
    for a, b in zip(info, ref_info):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert 0 < int(info.epochs_run) < cfg.epochs and bool(train_stopped(state, cfg.patience))  # stopped early
    again = train_until(apply, opt, cfg.epochs + 5, cfg.patience, state, labels, train, val, score)
    assert int(again["epoch"]) == int(state["epoch"])
    early = train_until(apply, opt, 3, cfg.patience, train_start(apply, opt, params, key, labels, train, val, score),
                        labels, train, val, score)
    assert int(early["epoch"]) == 3 and not bool(train_stopped(early, cfg.patience))
    # stopped_early reads the same condition from the returned diagnostics (no loop state needed)
    assert bool(stopped_early(info, cfg.patience)) and not bool(stopped_early(train_outcome(early)[1], cfg.patience))
    assert not bool(stopped_early(info, 0))  # patience 0: never


def test_fused_epoch_equals_the_textbook_loop_step_then_evaluate():
    """train_full_batch evaluates each parameter vector and differentiates the training loss at it in one
    computation, then steps; the fits are those of the textbook loop written out eagerly here: per epoch split the
    key, step at p with the gradient of the dropout-keyed training loss, evaluate the new p, keep it if its
    validation accuracy is higher (ties: lower validation loss), stop after ``patience`` epochs without."""
    import optax

    from jaxclp.train import make_optimizer, masked_cross_entropy

    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.normal(size=(40, 5)), jnp.float32)
    labels = jnp.asarray(rng.integers(0, 3, 40))
    train, val = jnp.arange(40) < 16, (jnp.arange(40) >= 16) & (jnp.arange(40) < 30)

    def apply(p, key, is_train):
        h = jnp.tanh(x @ p["w1"]) @ p["w2"]
        keep = jax.random.bernoulli(key, 0.7, h.shape)
        return jnp.where(is_train, jnp.where(keep, h / 0.7, 0.0), h)

    params = {"w1": jnp.asarray(rng.normal(size=(5, 8)), jnp.float32),
              "w2": jnp.asarray(rng.normal(size=(8, 3)), jnp.float32)}
    cfg = TrainConfig(lr=0.05, weight_decay=1e-3, epochs=80, patience=10)
    key = jax.random.key(3)
    got_p, got = jax.jit(lambda p, k: train_full_batch(apply, p, k, labels, train, val, cfg))(params, key)

    opt = make_optimizer(cfg)
    val_acc = lambda p: float(jnp.sum((apply(p, key, False).argmax(-1) == labels) & val) / jnp.sum(val))
    val_loss = lambda p: float(masked_cross_entropy(apply(p, key, False), labels, val))
    p, state, k = params, opt.init(params), key
    best, best_m, best_l, best_epoch, bad, epoch = p, val_acc(p), val_loss(p), -1, 0, 0
    while epoch < cfg.epochs and bad < cfg.patience:
        k, sub = jax.random.split(k)
        loss, g = jax.value_and_grad(lambda q: masked_cross_entropy(apply(q, sub, True), labels, train))(p)
        updates, state = opt.update(g, state, p)
        p = optax.apply_updates(p, updates)
        m, vl = val_acc(p), val_loss(p)
        if m > best_m or (m == best_m and vl < best_l):
            best, best_m, best_l, best_epoch, bad = p, m, vl, epoch, 0
        else:
            bad += 1
        epoch += 1
    assert 0 < epoch < cfg.epochs  # early stopping took part
    assert int(got.epochs_run) == epoch and int(got.best_epoch) == best_epoch
    assert float(got.best_val_accuracy) == pytest.approx(best_m, abs=1e-6)
    assert float(got.final_train_loss) == pytest.approx(float(loss), rel=1e-5)
    for name in params:
        np.testing.assert_allclose(np.asarray(got_p[name]), np.asarray(best[name]), rtol=1e-5, atol=1e-6)


def test_a_fit_with_or_without_a_deadline_is_one_program_and_the_same_fit():
    """fit_to_deadline's chunk program (train_chunk: the start state only where fresh) serves a fit without a
    deadline, a far deadline (one chunk) and a spent one (the first chunk only): one compilation for the three,
    the first two bit for bit train_full_batch's fit of the same model and keys, the third its first
    DEADLINE_EPOCHS epochs."""
    rng = np.random.default_rng(4)
    x = jnp.asarray(rng.normal(size=(60, 5)), jnp.float32)
    y = jnp.asarray(rng.integers(0, 3, 60))
    tm, vm = jnp.asarray(np.arange(60) % 3 == 0), jnp.asarray(np.arange(60) % 3 == 1)
    cfg = TrainConfig(epochs=3 * DEADLINE_EPOCHS, patience=0)
    key = jax.random.key(9)
    with compiled_programs() as names:
        fits = [fit_to_deadline(_dense_build, dict(width=3), key, (x,), y, tm, vm, cfg, deadline)
                for deadline in (None, float("inf"), time.perf_counter())]
    assert sum("_step_chunk" in name for name in names) == 1, names
    model = _dense_build(x, width=3)[0]

    @jax.jit
    def reference(key):  # the same fit as train_full_batch, in one jitted program
        init_key, drop_key = jax.random.split(key)
        params = model.init(init_key_of(init_key), x[:1], train=False)
        best, _ = train_full_batch(lambda p, k, train: model.apply(p, x, train=train), params, drop_key, y, tm, vm,
                                   cfg)
        return best, jax.nn.softmax(model.apply(best, x, train=False), -1)

    best, prior = reference(key)
    for fit in fits[:2]:
        assert all(np.array_equal(np.asarray(a), np.asarray(b))
                   for a, b in zip(jax.tree_util.tree_leaves(fit[1]), jax.tree_util.tree_leaves(best)))
        assert int(fit[2].epochs_run) == cfg.epochs
    np.testing.assert_array_equal(np.asarray(fits[0][0]), np.asarray(prior))
    assert int(fits[2][2].epochs_run) == DEADLINE_EPOCHS


class _Linear(nn.Module):
    width: int

    @nn.compact
    def __call__(self, x, train: bool):
        return nn.Dense(self.width)(x)


def _dense_build(x, *, width):
    """A linear model on ``x`` as fit_to_deadline's ``build``: (module, apply inputs, init inputs)."""
    return _Linear(width), (x,), (x[:1],)
