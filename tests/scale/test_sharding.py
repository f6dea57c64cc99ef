"""Multi-device: the class axis and the alpha axis shard over devices with unchanged results.

Runs in a fresh process with two forced host CPU devices (``XLA_FLAGS`` must be set before jax starts), in
float32 as a user would. Host "devices" share the cores and give no speed-up (``python -m benchmarks.speedups``),
so this checks correctness and that outputs keep their sharding, which is what GPU/TPU meshes need.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from reference import host_devices_env

REPO = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import os
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
    import numpy as np, jax, jax.numpy as jnp, jaxclp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    assert len(jax.devices()) == 2
    n, k = 500, 4
    rng = np.random.default_rng(0)
    s, r = rng.integers(0, n, 2000), rng.integers(0, n, 2000)
    g = jaxclp.Graph.from_edge_index(np.stack([np.r_[s, r], np.r_[r, s]]), n)
    prior = jax.nn.softmax(jnp.asarray(rng.normal(size=(n, k)), jnp.float32))
    H = jnp.eye(k) * 0.6 + 0.4 / k
    mesh = Mesh(np.array(jax.devices()), ("d",))
    cols, rep = NamedSharding(mesh, P(None, "d")), NamedSharding(mesh, P())
    ps, Hs = jax.device_put(prior, cols), jax.device_put(H, rep)
    for method in ("bicgstab", "neumann"):
        ref = jaxclp.solve(g, prior, H, prior, alpha=0.9, method=method)
        sol = jaxclp.solve(g, ps, Hs, ps, alpha=0.9, method=method)
        assert sol.value.sharding.spec == P(None, "d"), sol.value.sharding
        np.testing.assert_allclose(np.asarray(sol.value), np.asarray(ref.value), rtol=1e-5, atol=1e-7)
        assert bool(jnp.all(sol.converged)), sol.relative_residual
    alphas = jnp.array([0.5, 0.9])
    sa = jaxclp.solve(g, prior, H, prior, alpha=jax.device_put(alphas, NamedSharding(mesh, P("d"))),
                      method="bicgstab")
    ra = jaxclp.solve(g, prior, H, prior, alpha=alphas, method="bicgstab")
    assert sa.value.shape == (2, n, k)
    np.testing.assert_allclose(np.asarray(sa.value), np.asarray(ra.value), rtol=1e-5, atol=1e-7)
    b = jaxclp.propagate(g, ps, Hs, ps, alpha=0.5, l1_normalize=True)
    b_ref = jaxclp.propagate(g, prior, H, prior, alpha=0.5, l1_normalize=True)
    assert b.sharding.spec == P(None, "d"), b.sharding
    np.testing.assert_allclose(np.asarray(b), np.asarray(b_ref), rtol=1e-5, atol=1e-7)
    print("OK")
""")


def test_class_and_alpha_axes_shard_over_two_devices():
    env = host_devices_env()  # the script forces its host devices
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("OK")
