"""Dropout masks ~10x faster on CPU: the Threefry-2x32 hash of large arrays lowered unrolled (JAX's bits).

Every training step of the MLP and the GNNs draws dropout masks: ``jax.random`` hashes one counter pair per
two 32-bit words with Threefry-2x32 (20 rounds). JAX lowers that hash on CPU as a *rolled* loop (5 iterations of
4 rounds, a ``while`` over whole arrays, kept since 2019 for compile time, jax-ml/jax#1175), and on every other
platform unrolled or as a fused kernel. On CPU the rolled loop makes each round a separate pass over memory: a
4-block GNN step on Coauthor-CS spent most of its forward pass in its 12 dropout masks (18333 x 64 each); the
same masks unrolled take ~8-10x less time (``benchmarks/results/rng.md``: ``python -m jaxclp.benchmarks.rng``).

Unrolling every call site costs compile time (each site becomes ~100 HLO ops): a program with 64 sequential
``split`` + ``uniform`` calls compiled 2.7x slower. So :func:`install` registers, for the "cpu" platform only, a
lowering of ``jax.extend.random.threefry2x32_p`` that picks per call site from its (static) shape: arrays of at
least :data:`UNROLL_MIN_SIZE` counter pairs get :func:`threefry2x32` (unrolled), smaller ones
:func:`threefry2x32_rolled` (a ``fori_loop`` over the 5 groups, as compact as JAX's own and as fast at those
sizes). Both are written here from the Threefry specification (Salmon et al. 2011; the rotation constants and key
schedule of Random123's threefry2x32_20, which JAX implements) and are emitted as an out-of-line function. The
bits are identical to JAX's (tests: Random123's known-answer vectors for both, and ``jax.random`` outputs of
small and large shapes against a subprocess that keeps JAX's lowering), so results do not change, only their
speed. ``jaxclp`` calls :func:`install` on import; set ``JAXCLP_ROLLED_THREEFRY=1`` before importing it to keep
JAX's lowering.
"""

from __future__ import annotations

import os

import numpy as np

ENV = "JAXCLP_ROLLED_THREEFRY"
_state = {"installed": False, "reason": None}

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA
UNROLL_MIN_SIZE = 1 << 16
"""Counter pairs (elements of the broadcast shape) from which a call site is lowered unrolled: below it the
rolled loop is as fast (measured from 2^8 to 2^20 pairs on a 2-core AMD EPYC) and far smaller to compile."""


def _rotl(v, d):
    from jax import lax

    return lax.shift_left(v, d) | lax.shift_right_logical(v, np.uint32(32) - d)


def _start(key1, key2, x1, x2):
    """The key schedule ``(k1, k2, k1 ^ k2 ^ 0x1BD11BDA)`` and the first injection, broadcast: (ks, a, b)."""
    import jax.numpy as jnp

    ks = (key1, key2, key1 ^ key2 ^ np.uint32(_PARITY))
    shape = jnp.broadcast_shapes(*(jnp.shape(a) for a in (key1, key2, x1, x2)))
    return ks, jnp.broadcast_to(x1 + ks[0], shape), jnp.broadcast_to(x2 + ks[1], shape)


def _four_rounds(a, b, rotations):
    """One group: ``x0 += x1; x1 = rotl(x1, r) ^ x0`` for the group's four rotation constants."""
    for r in rotations:
        a = a + b
        b = _rotl(b, r) ^ a
    return a, b


def threefry2x32(key1, key2, x1, x2):
    """Threefry-2x32 with 20 rounds, unrolled: uint32 arrays (broadcast together) -> (y1, y2).

    Five groups of four rounds (``x0 += x1; x1 = rotl(x1, r) ^ x0``), each followed by the injection of the key
    schedule ``(k1, k2, k1 ^ k2 ^ 0x1BD11BDA)`` rotated by one and the group number.
    """
    u32 = np.uint32
    ks, a, b = _start(key1, key2, x1, x2)
    for group in range(5):
        a, b = _four_rounds(a, b, [u32(r) for r in _ROTATIONS[group % 2]])
        a = a + ks[(group + 1) % 3]
        b = b + ks[(group + 2) % 3] + u32(group + 1)
    return a, b


def threefry2x32_rolled(key1, key2, x1, x2):
    """:func:`threefry2x32` as a ``fori_loop`` over the five groups of four rounds (the same function): the
    carry holds the key schedule, rotated by one each group, and the group's rotation constants are indexed."""
    import jax.numpy as jnp
    from jax import lax

    ks, a, b = _start(key1, key2, x1, x2)
    rotations = jnp.asarray(_ROTATIONS, jnp.uint32)

    def group(i, carry):
        a, b, k0, k1, k2 = carry
        r = rotations[i % 2]
        a, b = _four_rounds(a, b, [r[j] for j in range(4)])
        return a + k1, b + k2 + (i + 1).astype(jnp.uint32), k1, k2, k0

    a, b, *_ = lax.fori_loop(0, 5, group, (a, b) + ks)
    return a, b


def _lowered(*args):
    """The CPU lowering's body: unrolled for call sites of at least :data:`UNROLL_MIN_SIZE` pairs, else rolled."""
    size = int(np.prod(np.broadcast_shapes(*(np.shape(a) for a in args)), dtype=np.int64))
    return list((threefry2x32 if size >= UNROLL_MIN_SIZE else threefry2x32_rolled)(*args))


def install() -> bool:
    """Registers jaxclp's lowering of ``threefry2x32_p`` for CPU (unrolled for large arrays; once; idempotent).

    Returns:
        True if it is installed; False if ``JAXCLP_ROLLED_THREEFRY`` is set or this JAX lacks the public
        primitive (:func:`status` says why). Never raises.
    """
    if _state["installed"]:
        return True
    if os.environ.get(ENV, "").strip().lower() not in ("", "0", "false", "no"):
        _state["reason"] = f"{ENV} is set: JAX's rolled lowering is kept"
        return False
    try:
        from jax.extend.random import threefry2x32_p
        from jax.interpreters import mlir

        mlir.register_lowering(threefry2x32_p, mlir.lower_fun(_lowered, multiple_results=True), platform="cpu",
                               inline=False)
    except Exception as e:  # noqa: BLE001 - an older/newer JAX without these names: keep JAX's lowering
        _state["reason"] = f"{type(e).__name__}: {e}"
        return False
    _state["installed"], _state["reason"] = True, None
    return True


def status() -> str:
    """One line: whether jaxclp's CPU lowering is in use, and why not if it is not."""
    if _state["installed"]:
        return f"jaxclp's threefry on CPU (unrolled from {UNROLL_MIN_SIZE} pairs)"
    return f"JAX's rolled threefry on CPU ({_state['reason']})"
