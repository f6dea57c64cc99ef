"""MLP training (jaxclp.mlp): parameter count, one fit, vmapped splits, and the deadline's chunks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxclp
from files import compiled_programs, features_graph
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


def test_fit_mlp_splits_depths_share_one_program_and_give_the_separate_fits():
    """shared_depths=(1, 2, 3): the three depths' fits compile one training program (with a deadline too: the
    same program), run the separate fits' epochs with the same best epochs and give their priors and parameters
    up to float rounding; a hidden that is not (w,) * d for a shared d is refused."""
    g, x, y, tm, vm = features_graph(seed=3, n=90)
    cfg = jaxclp.TrainConfig(epochs=40, patience=10)
    keys = jax.random.split(jax.random.key(2), 2)
    args = (keys, jnp.asarray(x), jnp.asarray(y), jnp.asarray(np.stack([tm, vm])), jnp.asarray(np.stack([vm, tm])))
    with compiled_programs() as names:
        shared = {d: fit_mlp_splits(*args, num_classes=3, hidden=(16,) * d, cfg=cfg, shared_depths=(1, 2, 3))
                  for d in (1, 2, 3)}
        far = fit_mlp_splits(*args, num_classes=3, hidden=(16,) * 2, cfg=cfg, shared_depths=(1, 2, 3),
                             deadline=float("inf"))
    assert sum("_mlp_depths_chunk" in name for name in names) == 1, names
    for d in (1, 2, 3):
        alone = fit_mlp_splits(*args, num_classes=3, hidden=(16,) * d, cfg=cfg)
        assert jax.tree_util.tree_structure(shared[d].params) == jax.tree_util.tree_structure(alone.params)
        np.testing.assert_array_equal(shared[d].info.epochs_run, alone.info.epochs_run)
        np.testing.assert_array_equal(shared[d].info.best_epoch, alone.info.best_epoch)
        np.testing.assert_allclose(shared[d].prior, alone.prior, atol=1e-5)
        for a, b in zip(jax.tree_util.tree_leaves(shared[d].params), jax.tree_util.tree_leaves(alone.params)):
            np.testing.assert_allclose(a, b, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(far.prior), np.asarray(shared[2].prior))
    with pytest.raises(ValueError, match=r"hidden must be \(w,\) \* d with d in shared_depths"):
        fit_mlp_splits(*args, num_classes=3, hidden=(16, 8), cfg=cfg, shared_depths=(1, 2, 3))


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
