"""LP, C&S and CLP* compile their kernels only (issue 69, "compile once").

On the CPU their elementwise glue (one-hot labels, the C&S residual, scale and smoothing start, the reset system's
prior and value, the iteration's backward error) runs in numpy: the same IEEE operations, each rounded once, as
the eager and small jitted programs they replace, which compiled one program per operation and shape. On an
accelerator (``jaxclp.graph.cpu_resident`` false) the device path stays; forcing it on the CPU here checks that
both paths give the same bits.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from files import compiled_programs, propagation_problem

import jaxclp
from jaxclp import baselines
from jaxclp.baselines import propagate_labels
from jaxclp.solve import backward_error, system_norm

# the programs these methods may compile: solver and iteration kernels, the operator's values and bounds, and
# the blocks that hold a reduction or a sparse product (kept on the device: their bits depend on XLA's order)
KERNELS = {"_solve_kernel", "norm_bounds", "_edge_values", "_iterate", "_iterate_norms", "_reset_setup",
           "_cs_autoscale", "_clp_star"}


GRID = np.asarray([0.3, 0.6, 0.9])

CASES = {
    "lp": lambda g, p, y, t: jaxclp.label_propagation(g, y, t, 3, alpha=GRID),
    "lp_reset": lambda g, p, y, t: jaxclp.label_propagation(g, y, t, 3, alpha=GRID, reset_train=True),
    "lp_reset_scalar": lambda g, p, y, t: jaxclp.label_propagation(g, y, t, 3, alpha=0.7, reset_train=True),
    "lp_pyg": lambda g, p, y, t: jaxclp.label_propagation(g, y, t, 3, alpha=GRID, num_layers=6, clamp=(0, 1),
                                                          reset_train=True),
    "cs_auto": lambda g, p, y, t: jaxclp.correct_and_smooth(g, p, y, t, alpha_correct=0.8, alpha_smooth=GRID),
    "cs_fixed": lambda g, p, y, t: jaxclp.correct_and_smooth(g, p, y, t, alpha_correct=0.9, alpha_smooth=GRID,
                                                             scale=20.0),
    "cs_fixed_alpha_one": lambda g, p, y, t: jaxclp.correct_and_smooth(g, p, y, t, alpha_correct=1.0,
                                                                       alpha_smooth=GRID, scale=1.0),
    "cs_pyg": lambda g, p, y, t: jaxclp.correct_and_smooth(g, p, y, t, alpha_correct=0.8, alpha_smooth=0.6,
                                                           correct_layers=3, smooth_layers=4, clamp=True,
                                                           clip_corrected=False),
    "clp_star": lambda g, p, y, t: jaxclp.clp_star(g, p, p, jax.device_put(np.full((3, 3), 1.0 / 3.0, p.dtype)),
                                                   alpha=GRID),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_baselines_compile_only_their_kernels(case):
    """No one-operation eager program and no small glue program: only :data:`KERNELS` compile (on shapes no other
    test uses: a program compiled before in the process is not listed again)."""
    n = 131 + 2 * sorted(CASES).index(case)
    g, prior, y, train, _ = propagation_problem(n, seed=11)
    with compiled_programs() as names:
        jax.block_until_ready(CASES[case](g, prior, y, train))
    assert set(names) <= KERNELS, names


def _leaves(x):
    return [np.asarray(v) for v in (x[:-1] if isinstance(x, jaxclp.Solution) else [x])]


def _same_bits(a, b):
    return all(u.dtype == v.dtype and u.shape == v.shape and u.tobytes() == v.tobytes()
               for u, v in zip(_leaves(a), _leaves(b), strict=True))


CS_OPTIONS = [dict(alpha_correct=0.5), dict(alpha_correct=0.9, scale=20.0), dict(alpha_correct=1.0, scale=1.0),
              dict(alpha_correct=0.8, autoscale_cap=None),
              dict(alpha_correct=0.8, correct_layers=3, clamp=True, clip_corrected=False)]


def _propagate_options(train):
    return [dict(alpha=GRID, reset_mask=train), dict(alpha=0.8, reset_mask=train),
            dict(alpha=GRID, reset_mask=train, method="bicgstab"), dict(alpha=GRID, num_layers=7),
            dict(alpha=0.9, clamp=(-0.5, 0.5)), dict(alpha=np.asarray([0.5, 1.0]), num_layers=5, reset_mask=train),
            dict(alpha=0.9, clamp=(0.0, 1.0), reset_mask=train, tol=1e-4)]


def _outputs(g, prior, y, train, x0):
    """LP, every C&S option of :data:`CS_OPTIONS` and every propagation of :func:`_propagate_options`."""
    out = {"lp": jaxclp.label_propagation(g, y, train, 3, alpha=GRID)}
    out |= {f"cs_{i}": jaxclp.correct_and_smooth(g, prior, y, train, alpha_smooth=GRID, **kw)
            for i, kw in enumerate(CS_OPTIONS)}
    out |= {f"propagate_{i}": propagate_labels(g, x0, **kw) for i, kw in enumerate(_propagate_options(train))}
    return out


@pytest.mark.parametrize("x64", [False, True])
def test_host_glue_gives_the_device_paths_bits(monkeypatch, x64):
    """Every option of LP and C&S: the numpy glue of CPU arrays equals, bit for bit, the jitted and eager glue the
    device path runs (forced here by a ``cpu_resident`` that says no), in float32 and float64."""
    with jax.enable_x64(x64):
        g, prior, y, train, _ = propagation_problem(151, seed=11)
        x0 = jnp.asarray(np.random.default_rng(2).normal(size=(151, 3)), jnp.result_type(float))
        host = _outputs(g, prior, y, train, x0)
        monkeypatch.setattr(baselines, "cpu_resident", lambda *xs: False)
        device = _outputs(g, prior, y, train, x0)
    assert not [name for name in host if not _same_bits(host[name], device[name])]


def test_clip_of_a_negative_zero_sum_matches_xla():
    """C&S clips ``Z = D + scaled`` to [0, 1]: a -0.0 sum becomes +0.0 on both paths, NaN stays NaN."""
    prior = np.asarray([[-0.0, 0.5], [0.25, 2.0]], np.float32)
    scaled = np.asarray([[-0.0, -1.0], [np.nan, 0.5]], np.float32)
    y = np.zeros((2, 2), np.float32)
    train = np.asarray([False, False])
    host = baselines._cs_smooth_start_host(prior, scaled, y, train, True)
    device = np.asarray(baselines._cs_smooth_start(prior, scaled, y, train, True))
    assert host.tobytes() == device.tobytes()


def test_backward_error_and_system_norm_on_the_host_are_the_device_bits():
    """:func:`jaxclp.solve.system_norm` and :func:`jaxclp.solve.backward_error` of numpy inputs run in numpy, with
    the bits of the jnp operations (zero denominators included)."""
    rng = np.random.default_rng(5)
    a = rng.random((4, 1)).astype(np.float32)
    rows, cols = (rng.random(6) * 2).astype(np.float32), (rng.random(6) * 2).astype(np.float32)
    res, xn, den = (rng.random((4, 6)).astype(np.float32) for _ in range(3))
    xn[0, :2], den[0, :2] = 0.0, 0.0
    host_m = system_norm(a, rows, cols)
    host = backward_error(res, xn, den, host_m)
    device_m = system_norm(*map(jnp.asarray, (a, rows, cols)))
    device = backward_error(*map(jnp.asarray, (res, xn, den)), device_m)
    assert isinstance(host, np.ndarray) and isinstance(device, jax.Array)
    assert np.asarray(device_m).tobytes() == host_m.tobytes()
    assert np.asarray(device).tobytes() == host.tobytes()
    assert not host[0, :2].any()
