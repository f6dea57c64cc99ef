"""Dropout masks 20x faster on CPU: the Threefry-2x32 hash lowered unrolled (the same bits as JAX's own).

Every training step of the MLP and the GNNs draws dropout masks: ``jax.random`` hashes one counter pair per
two 32-bit words with Threefry-2x32 (20 rounds). JAX lowers that hash on CPU as a *rolled* loop (5 iterations of
4 rounds, a ``while`` over whole arrays, kept since 2019 for compile time, jax-ml/jax#1175), and on every other
platform unrolled or as a fused kernel. On CPU the rolled loop makes each round a separate pass over memory: a
4-block GNN step on Coauthor-CS spent 140 of its 165 ms forward in its 12 dropout masks (18333 x 64 each), and
the same masks unrolled take 7 ms (142 -> 7.2 ms, measured ad hoc in one session on the shared 2-core machine;
no committed benchmark yet).

:func:`install` registers, for the "cpu" platform only, a lowering of ``jax.extend.random.threefry2x32_p``
that computes the same function unrolled (written here from the Threefry specification, Salmon et al. 2011;
the rotation constants and key schedule of Random123's threefry2x32_20, which JAX implements). It is emitted as
an out-of-line function (one copy per program, so compile time stays bounded). The bits are identical to
JAX's (tests: Random123's known-answer vectors, and ``jax.random`` outputs against a subprocess that keeps JAX's
lowering), so results do not change, only their speed. ``jaxclp`` calls :func:`install` on import; set
``JAXCLP_ROLLED_THREEFRY=1`` before importing it to keep JAX's lowering.
"""

from __future__ import annotations

import os

import numpy as np

ENV = "JAXCLP_ROLLED_THREEFRY"
_state = {"installed": False, "reason": None}

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA


def threefry2x32(key1, key2, x1, x2):
    """Threefry-2x32 with 20 rounds, unrolled: uint32 arrays (broadcast together) -> (y1, y2).

    Five groups of four rounds (``x0 += x1; x1 = rotl(x1, r) ^ x0``), each followed by the injection of the key
    schedule ``(k1, k2, k1 ^ k2 ^ 0x1BD11BDA)`` rotated by one and the group number.
    """
    import jax.numpy as jnp
    from jax import lax

    u32 = np.uint32

    def rotl(v, d):
        return lax.shift_left(v, u32(d)) | lax.shift_right_logical(v, u32(32 - d))

    ks = (key1, key2, key1 ^ key2 ^ u32(_PARITY))
    shape = jnp.broadcast_shapes(*(jnp.shape(a) for a in (key1, key2, x1, x2)))
    a = jnp.broadcast_to(x1 + ks[0], shape)
    b = jnp.broadcast_to(x2 + ks[1], shape)
    for group in range(5):
        for r in _ROTATIONS[group % 2]:
            a = a + b
            b = rotl(b, r) ^ a
        a = a + ks[(group + 1) % 3]
        b = b + ks[(group + 2) % 3] + u32(group + 1)
    return a, b


def install() -> bool:
    """Registers the unrolled lowering of ``threefry2x32_p`` for CPU (once; idempotent).

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

        mlir.register_lowering(threefry2x32_p, mlir.lower_fun(lambda *a: list(threefry2x32(*a)),
                                                              multiple_results=True),
                               platform="cpu", inline=False)
    except Exception as e:  # noqa: BLE001 - an older/newer JAX without these names: keep JAX's lowering
        _state["reason"] = f"{type(e).__name__}: {e}"
        return False
    _state["installed"], _state["reason"] = True, None
    return True


def status() -> str:
    """One line: whether the unrolled CPU lowering is in use, and why not if it is not."""
    return "unrolled threefry on CPU" if _state["installed"] else f"JAX's rolled threefry on CPU ({_state['reason']})"
