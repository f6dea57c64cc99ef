"""Dropout masks ~10x faster on CPU, for jaxclp's own training only: a key type whose Threefry hash is unrolled.

Every training step of the MLP and the GNNs draws dropout masks: ``jax.random`` hashes one counter pair per
two 32-bit words with Threefry-2x32 (20 rounds). JAX lowers that hash on CPU as a *rolled* loop (5 iterations of
4 rounds, a ``while`` over whole arrays, kept since 2019 for compile time, jax-ml/jax#1175), and on every other
platform unrolled or as a fused kernel. On CPU the rolled loop makes each round a separate pass over memory: a
4-block GNN step on Coauthor-CS spent most of its forward pass in its 12 dropout masks (18333 x 64 each); the
same masks unrolled take ~8-10x less time (``benchmarks/results/rng.md``: ``python -m benchmarks.rng``).

**Scoped by construction.** Importing jaxclp changes nothing in JAX: JAX's ``threefry2x32`` primitive keeps
its own lowering for every caller. jaxclp defines a PRNG implementation of its own, :data:`FAST_THREEFRY`
(``jax.extend.random.define_prng_impl``), that is JAX's ``threefry2x32`` in everything (key layout, ``seed``,
``split``, ``fold_in`` are JAX's functions; ``random_bits`` is JAX's partitionable algorithm) except that the
hash of ``random_bits`` binds :data:`fast_threefry2x32_p`, a primitive of jaxclp's: on CPU it is lowered by
:func:`_lowered` below, on other platforms by binding JAX's own primitive (its GPU kernel). The library's
trainers (:func:`jaxclp.fit_mlp`, the GNN fits, LINKX, the end-to-end fit) pass their dropout key through :func:`fast_key`, which re-types
a ``threefry2x32`` key as :data:`FAST_THREEFRY` (the same 64 bits): flax's ``Dropout`` then draws through it.
Any other key, and every draw outside those trainers, is untouched. Users who want the speed for their own
masks call :func:`fast_key` on their key (``jax.random.bernoulli(fast_key(k), p, shape)``): the bits are those
``k`` itself gives.

Unrolling every call site costs compile time (each site becomes ~100 HLO ops): a program with 64 sequential
``split`` + ``uniform`` calls compiled 2.7x slower. So the CPU lowering picks per call site from its (static)
shape: arrays of at least :data:`UNROLL_MIN_SIZE` counter pairs get :func:`threefry2x32` (unrolled), smaller
ones :func:`threefry2x32_rolled` (a ``fori_loop`` over the 5 groups, as compact as JAX's own and as fast at
those sizes). Both are written here from the Threefry specification (Salmon et al. 2011; the rotation constants
and key schedule of Random123's threefry2x32_20, which JAX implements) and are emitted as an out-of-line
function. The bits are identical to JAX's (tests: Random123's known-answer vectors for both, and ``jax.random``
outputs of small and large shapes, through a :func:`fast_key` and through JAX's own key), so results do not
change, only their speed. Set ``JAXCLP_ROLLED_THREEFRY=1`` (before the first fit) to make :func:`fast_key`
return its key unchanged, i.e. to keep JAX's rolled lowering in jaxclp's trainers too.
"""

from __future__ import annotations

import math
import os

import jax
import numpy as np

ENV = "JAXCLP_ROLLED_THREEFRY"

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


# ------------------------------------------------------------------------- jaxclp's primitive and key type
def _define_primitive(name: str = "jaxclp_threefry2x32", cpu_lowering=None):
    """A primitive computing JAX's ``threefry2x32`` (same operands, abstract evaluation and batching), lowered on
    CPU by ``cpu_lowering`` (default :func:`_lowered`) and on every other platform by JAX's own primitive."""
    from jax.extend.core import Primitive
    from jax.extend.random import threefry2x32_p
    from jax.interpreters import batching, mlir

    p = Primitive(name)
    p.multiple_results = True
    bind_jitted = jax.jit(p.bind)  # eager calls: compiled like any primitive (traced, the bind is staged)
    p.def_impl(lambda *args: bind_jitted(*args))
    p.def_effectful_abstract_eval(threefry2x32_p.abstract_eval)  # JAX's: shapes, dtype checks, shardings
    batching.defbroadcasting(p)
    # registrations of jaxclp's own primitive: nothing else lowers differently
    mlir.register_lowering(p, mlir.lower_fun(lambda *a: threefry2x32_p.bind(*a), multiple_results=True))
    mlir.register_lowering(p, mlir.lower_fun(cpu_lowering or _lowered, multiple_results=True), platform="cpu",
                           inline=False)
    return p


def _random_bits(key, bit_width, shape):
    """JAX's ``threefry_random_bits`` (partitionable form: counter pairs = the (hi, lo) words of the row-major
    index; 32 bits = ``y1 ^ y2``) with the hash bound as :data:`fast_threefry2x32_p`. With
    ``jax_threefry_partitionable`` off, or past 2**32 elements, it is JAX's own function (same bits, JAX's
    lowering)."""
    return _partitionable_bits(fast_threefry2x32_p, key, bit_width, shape)


def _partitionable_bits(primitive, key, bit_width, shape):
    """JAX's partitionable ``threefry_random_bits`` with the hash bound as ``primitive`` (one of jaxclp's two
    Threefry primitives); JAX's own function where that layout does not apply (partitionable off, 2**32 elements or
    more, an unusual width)."""
    from jax import lax
    from jax.extend.random import threefry_prng_impl

    if not jax.config.jax_threefry_partitionable or math.prod(shape) >= 2**32 or bit_width not in (8, 16, 32, 64):
        return threefry_prng_impl.random_bits(key, bit_width, shape)
    hi, lo = _index_pairs(shape)
    bits1, bits2 = primitive.bind(key[0], key[1], hi, lo)
    dtype = np.dtype(f"uint{bit_width}")
    if bit_width == 64:
        wide = [lax.convert_element_type(b, dtype) for b in (bits1, bits2)]
        return lax.shift_left(wide[0], np.array(32, dtype)) | wide[1]
    if bit_width == 32:
        return bits1 ^ bits2
    return lax.convert_element_type(bits1 ^ bits2, dtype)


def _index_pairs(shape):
    """JAX's partitionable counters of ``shape``: (hi, lo) words of the row-major index (below 2**32: hi = 0)."""
    from jax import lax

    size = math.prod(shape)
    lo = lax.reshape(lax.iota(np.uint32, max(size, 1))[:size], tuple(shape))
    return lax.full(tuple(shape), 0, np.uint32), lo


def _define_impl():
    from jax.extend.random import define_prng_impl, threefry_prng_impl as t

    return define_prng_impl(key_shape=t.key_shape, seed=t.seed, split=t.split, random_bits=_random_bits,
                            fold_in=t.fold_in, name="jaxclp_threefry2x32", tag="jcf")


fast_threefry2x32_p = _define_primitive()
"""jaxclp's Threefry-2x32 primitive: JAX's ``threefry2x32`` (same operands, same results), lowered on CPU by
:func:`_lowered` (unrolled for large arrays) and elsewhere by JAX's own primitive. Only :data:`FAST_THREEFRY`'s
``random_bits`` binds it."""

FAST_THREEFRY = _define_impl()
"""The PRNG implementation of :func:`fast_key`'s keys (``jax.random.key_impl`` of them): JAX's ``threefry2x32``
with :data:`fast_threefry2x32_p` as the hash of ``random_bits``."""


def enabled() -> bool:
    """Whether :func:`fast_key` re-types keys (False when ``JAXCLP_ROLLED_THREEFRY`` is set)."""
    return os.environ.get(ENV, "").strip().lower() in ("", "0", "false", "no")


def fast_key(key: jax.Array) -> jax.Array:
    """``key`` re-typed as a :data:`FAST_THREEFRY` key: draws from it give the bits ``key`` gives, faster on CPU.

    Args:
        key: a ``threefry2x32`` key: raw uint32 data (..., 2) under JAX's default implementation, or a typed key
            (``jax.random.key``); any leading batch shape.

    Returns:
        The same key data typed with jaxclp's implementation; ``key`` itself when it is of another
        implementation (rbg, a custom one), already a :data:`FAST_THREEFRY` key, or when
        ``JAXCLP_ROLLED_THREEFRY`` is set. Works under ``jit``/``vmap`` (the choice depends on types only).
    """
    if not enabled():
        return key
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        if jax.random.key_impl(key) != "threefry2x32":
            return key
        data = jax.random.key_data(key)
    elif key.dtype == np.uint32 and key.shape[-1:] == (2,) and jax.config.jax_default_prng_impl == "threefry2x32":
        data = key
    else:
        return key
    return jax.random.wrap_key_data(data, impl=FAST_THREEFRY)


# ------------------------------------------------------------------- initialisation keys: cheaper to compile
def _unrolled_split(key, shape):
    """JAX's partitionable ``split`` (``_threefry_split_foldlike``) with the hash bound unrolled."""
    import jax.numpy as jnp

    if not jax.config.jax_threefry_partitionable or math.prod(shape) >= 2**32:
        from jax.extend.random import threefry_prng_impl

        return threefry_prng_impl.split(key, shape)
    hi, lo = _index_pairs(shape)
    b1, b2 = unrolled_threefry2x32_p.bind(key[0], key[1], hi, lo)
    return jnp.stack([b1, b2], axis=b1.ndim)


def _unrolled_fold_in(key, data):
    """JAX's ``fold_in`` (``threefry_2x32(key, threefry_seed(data))``) with the hash bound unrolled."""
    import jax.numpy as jnp
    from jax.extend.random import threefry_prng_impl

    seed = threefry_prng_impl.seed(jnp.asarray(data, jnp.uint32))  # (2,) uint32: JAX's threefry_seed
    b1, b2 = unrolled_threefry2x32_p.bind(key[0], key[1], seed[0:1], seed[1:2])
    return jnp.concatenate([b1, b2])


def _unrolled_bits(key, bit_width, shape):
    """:func:`_random_bits` with the hash bound unrolled."""
    return _partitionable_bits(unrolled_threefry2x32_p, key, bit_width, shape)


unrolled_threefry2x32_p = _define_primitive("jaxclp_threefry2x32_unrolled",
                                            lambda *a: list(threefry2x32(*a)))
"""JAX's ``threefry2x32`` (same operands and results), lowered on CPU by :func:`threefry2x32` (unrolled) at every
size, elsewhere by JAX's own primitive. Only :data:`INIT_THREEFRY`'s functions bind it."""


def _define_init_impl():
    from jax.extend.random import define_prng_impl, threefry_prng_impl as t

    return define_prng_impl(key_shape=t.key_shape, seed=t.seed, split=_unrolled_split,
                            random_bits=_unrolled_bits, fold_in=_unrolled_fold_in, name="jaxclp_threefry2x32_init",
                            tag="jci")


INIT_THREEFRY = _define_init_impl()
"""The PRNG implementation of :func:`init_key`'s keys: JAX's ``threefry2x32`` (key layout, seed, the bits of
``split``, ``fold_in`` and ``random_bits``) with every hash unrolled on CPU."""


def init_key(key: jax.Array) -> jax.Array:
    """``key`` re-typed for a model's parameter initialisation: the same parameters, far less to compile on CPU.

    A flax ``init`` hashes its key a few dozen times (a ``fold_in`` per module and parameter, the bits of every
    draw), each a small array: JAX lowers each hash on CPU as a rolled loop, and XLA compiles every such loop
    separately (the initialisation was 1.5-2 s of the 4-6 s a tuned GNN grid program took to compile on 2 cores).
    Small arrays hash as fast unrolled, and the unrolled code compiles faster, so :data:`INIT_THREEFRY` unrolls every
    hash (``split`` and ``fold_in`` too, unlike :data:`FAST_THREEFRY`, whose large dropout masks inside training
    loops keep :func:`fast_key`'s per-size choice). The bits are JAX's (tests): the parameters are those ``key``
    gives. ``key`` itself when :func:`fast_key` would return it unchanged (another implementation, or
    ``JAXCLP_ROLLED_THREEFRY`` set).
    """
    typed = fast_key(key)
    if typed is key:
        return key
    return jax.random.wrap_key_data(jax.random.key_data(typed), impl=INIT_THREEFRY)


def status() -> str:
    """One line: which Threefry lowering jaxclp's trainers use on CPU for their dropout masks."""
    if enabled():
        return f"jaxclp's threefry on CPU (unrolled from {UNROLL_MIN_SIZE} pairs) for jaxclp's dropout keys"
    return f"JAX's rolled threefry on CPU ({ENV} is set: jaxclp's trainers keep JAX's lowering)"
