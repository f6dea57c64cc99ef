"""MLP training (jaxclp.mlp): parameter count, one fit, vmapped splits, and the deadline's chunks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxclp
from files import features_graph
from jaxclp.mlp import fit_mlp_splits, mlp_param_count

FAST = dict(epochs=60, patience=20)


def test_param_count():
    assert mlp_param_count(10, 3, (64,)) == 10 * 64 + 64 + 64 * 3 + 3
    assert mlp_param_count(10, 3, ()) == 10 * 3 + 3
    assert mlp_param_count(10, 3, (64, 64)) == 10 * 64 + 64 + 64 * 64 + 64 + 64 * 3 + 3


def test_fit_mlp_learns_and_ignores_hidden_labels():
    g, x, y, tm, vm = features_graph()
    cfg = jaxclp.TrainConfig(**FAST)
    r = jaxclp.fit_mlp(jax.random.key(0), x, jnp.asarray(y), jnp.asarray(tm), jnp.asarray(vm), num_classes=3,
                       cfg=cfg)
    test = ~tm & ~vm
    assert (np.asarray(r.prior).argmax(1) == y)[test].mean() > 0.7
    np.testing.assert_allclose(np.asarray(r.prior).sum(1), 1, atol=1e-5)
    y_hidden = np.where(tm | vm, y, -1)
    r2 = jaxclp.fit_mlp(jax.random.key(0), x, jnp.asarray(y_hidden), jnp.asarray(tm), jnp.asarray(vm),
                        num_classes=3, cfg=cfg)
    np.testing.assert_array_equal(r.prior, r2.prior)


@pytest.mark.cpu_bitwise
def test_fit_mlp_splits_equals_single_fits():
    g, x, y, tm, vm = features_graph()
    cfg = jaxclp.TrainConfig(**FAST)
    keys = jax.random.split(jax.random.key(1), 2)
    tms = np.stack([tm, vm])
    vms = np.stack([vm, tm])
    rs = fit_mlp_splits(keys, jnp.asarray(x), jnp.asarray(y), jnp.asarray(tms), jnp.asarray(vms),
                        num_classes=3, cfg=cfg)
    for i in range(2):
        r = jaxclp.fit_mlp(keys[i], x, jnp.asarray(y), jnp.asarray(tms[i]), jnp.asarray(vms[i]), num_classes=3,
                           cfg=cfg)
        np.testing.assert_allclose(rs.prior[i], r.prior, atol=1e-5)


def test_fit_mlp_splits_deadline_stops_at_a_chunk_with_the_best_epoch_so_far():
    """Under a deadline the splits train in chunks (MLP_CHUNK_EPOCHS first): a far deadline gives the fit without
    one (same epochs and keys); a spent one stops after the first chunk, and each split's prior is the fit whose
    epochs end there (the best epoch among the first MLP_CHUNK_EPOCHS), as a fit with that many epochs gives it."""
    from jaxclp.mlp import MLP_CHUNK_EPOCHS

    g, x, y, tm, vm = features_graph()
    cfg = jaxclp.TrainConfig(epochs=3 * MLP_CHUNK_EPOCHS + 5, patience=0)
    keys = jax.random.split(jax.random.key(1), 2)
    args = (keys, jnp.asarray(x), jnp.asarray(y), jnp.asarray(np.stack([tm, vm])), jnp.asarray(np.stack([vm, tm])))
    whole = fit_mlp_splits(*args, num_classes=3, cfg=cfg)
    import time

    for far_deadline in (float("inf"), time.perf_counter() + 1e6):  # one chunk; 25 epochs, then the rest
        far = fit_mlp_splits(*args, num_classes=3, cfg=cfg, deadline=far_deadline)
        np.testing.assert_array_equal(far.info.epochs_run, [cfg.epochs] * 2)
        np.testing.assert_array_equal(far.info.best_epoch, whole.info.best_epoch)
        np.testing.assert_allclose(far.prior, whole.prior, atol=1e-6)
    spent = fit_mlp_splits(*args, num_classes=3, cfg=cfg, deadline=0.0)
    short = fit_mlp_splits(*args, num_classes=3, cfg=cfg._replace(epochs=MLP_CHUNK_EPOCHS))
    np.testing.assert_array_equal(spent.info.epochs_run, [MLP_CHUNK_EPOCHS] * 2)
    np.testing.assert_array_equal(spent.info.best_epoch, short.info.best_epoch)
    np.testing.assert_allclose(spent.prior, short.prior, atol=1e-6)
    assert not np.allclose(spent.prior, whole.prior, atol=1e-3)  # the later epochs changed the fit
