"""jaxclp._rng: the unrolled Threefry-2x32 lowering on CPU gives JAX's bits exactly."""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxclp import _rng

# Random123's known-answer vectors for threefry2x32_20 (also jax's own random_test): (key, counter) -> output
KAT = [((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
       ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
       ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0))]


def _u32(*v):
    return [np.asarray(x, np.uint32) for x in v]


@pytest.mark.parametrize("key,ctr,expected", KAT)
def test_known_answers_direct_and_through_the_registered_lowering(key, ctr, expected):
    for fn in (_rng.threefry2x32, _rng.threefry2x32_rolled, jax.jit(_rng.threefry2x32_rolled)):
        y = fn(*_u32(*key), *_u32(*ctr))
        assert [int(a) for a in y] == list(expected)
    # jax's primitive, jitted on CPU: lowered by the rule jaxclp registered
    from jax.extend.random import threefry2x32_p
    out = jax.jit(lambda *a: threefry2x32_p.bind(*a))(*_u32(*key), *_u32(*ctr))
    assert [int(a) for a in out] == list(expected)


def test_installed_on_import():
    import jaxclp  # noqa: F401
    assert _rng.install() and _rng.status() == "jaxclp's threefry on CPU (unrolled from 65536 pairs)"


def test_rolled_equals_unrolled_on_both_sides_of_the_size_switch():
    """The two forms agree bitwise on random counters and keys, at sizes below and above UNROLL_MIN_SIZE."""
    rng = np.random.default_rng(1)
    for n in (1, 7, _rng.UNROLL_MIN_SIZE - 1, _rng.UNROLL_MIN_SIZE + 3):
        k1, k2 = (np.uint32(v) for v in rng.integers(0, 2**32, size=2))
        x1, x2 = (rng.integers(0, 2**32, size=n, dtype=np.uint32) for _ in range(2))
        a = jax.jit(_rng.threefry2x32)(k1, k2, x1, x2)
        b = jax.jit(_rng.threefry2x32_rolled)(k1, k2, x1, x2)
        assert all(np.array_equal(np.asarray(p), np.asarray(q)) for p, q in zip(a, b))


def test_lowering_unrolls_only_large_call_sites():
    """jaxclp's lowering emits the rolled loop (a while) for small arrays and straight-line code for large ones.
    It is the CPU platform's lowering, so the program is lowered for CPU whatever the default backend."""
    from jax.extend.random import threefry2x32_p

    def hlo(n):
        x = np.zeros(n, np.uint32)
        traced = jax.jit(lambda *a: threefry2x32_p.bind(*a)).trace(*_u32(1, 2), x, x)
        return traced.lower(lowering_platforms=("cpu",)).as_text()

    assert "while" in hlo(16) and "while" not in hlo(_rng.UNROLL_MIN_SIZE)


def test_broadcast_key_over_counter_arrays():
    rng = np.random.default_rng(0)
    x1, x2 = (rng.integers(0, 2**32, size=(3, 5), dtype=np.uint32) for _ in range(2))
    k1, k2 = _u32(0x13198A2E, 0x03707344)
    a, b = _rng.threefry2x32(k1, k2, x1, x2)
    for i, j in [(0, 0), (2, 4), (1, 3)]:
        ai, bi = _rng.threefry2x32(k1, k2, x1[i, j], x2[i, j])
        assert (int(a[i, j]), int(b[i, j])) == (int(ai), int(bi))


_PROBE = r"""
import hashlib, json, jax, jax.numpy as jnp, numpy as np
import jaxclp
from jaxclp import _rng
k = jax.random.PRNGKey(42)
outs = {
    "bernoulli": jax.jit(lambda k: jax.random.bernoulli(k, 0.8, (7, 1001)))(k),
    "normal": jax.jit(lambda k: jax.random.normal(k, (333, 17)))(k),
    "uniform_odd": jax.random.uniform(k, (5, 3, 7)),
    "split": jax.random.key_data(jax.random.split(k, 9)),
    "vmapped": jax.jit(jax.vmap(lambda k: jax.random.bits(k, (11,))))(jax.random.split(k, 4)),
    "new_style": jax.random.randint(jax.random.key(3), (257,), 0, 1000),
    "big_mask": jax.jit(lambda k: jax.random.bernoulli(k, 0.5, (1001, 300)))(k),
    "big_bits_odd": jax.random.bits(k, (2 * 65536 + 3,)),
}
print(json.dumps({"status": _rng.status(),
                  **{n: hashlib.sha256(np.asarray(v).tobytes()).hexdigest() for n, v in outs.items()}}))
"""


def _probe(rolled: bool) -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env.pop(_rng.ENV, None)
    if rolled:
        env[_rng.ENV] = "1"
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=300,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_same_bits_as_jax_rolled_lowering():
    """jax.random outputs (bernoulli, normal, odd shapes, split, vmap, new-style keys; small arrays, rolled, and
    large ones, unrolled) are bitwise those of JAX's own CPU lowering (a subprocess with JAXCLP_ROLLED_THREEFRY=1)."""
    fast, rolled = _probe(False), _probe(True)
    assert fast.pop("status").startswith("jaxclp's threefry on CPU")
    assert rolled.pop("status").startswith("JAX's rolled threefry on CPU (JAXCLP_ROLLED_THREEFRY is set")
    assert fast == rolled
