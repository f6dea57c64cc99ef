"""Lowered programs kept on disk, so that a new process skips tracing and lowering them: :func:`stored_jit`.

JAX's persistent compilation cache (:mod:`jaxclp.compilation_cache`) keeps XLA's executables, but a process must
trace and lower a program before it can look its executable up: on 2 CPU cores that is most of what a second graph
of a known shape bucket pays (``benchmarks/results/compile_census_cpu.md``). :func:`stored_jit` is ``jax.jit``
that also keeps each lowered program (StableHLO, :mod:`jax.export`) in a ``programs`` folder beside the executables;
a process that finds one deserializes it (milliseconds) instead of running the Python function, and XLA's cache
serves its executable. The program is the StableHLO ``jax.jit`` lowers, compiled inside ``jax.export``'s small
calling wrapper: at XLA's default optimization the results are jit's bit for bit (the tests, and ``jaxclp run`` /
``reproduce`` records compared with the store on and off); under other XLA flags (the test suite's
``--xla_backend_optimization_level=0``) they can differ at float rounding.

A stored program is keyed by everything its lowering reads: the function, its static arguments (by value; a
function among them only by name and only from jaxclp), the shapes, dtypes and tree structure of the others, the
bytes of every jaxclp source file, the jax and jaxlib versions, the backend, the JAX settings that tracing reads
(``jax.config``'s trace context) and the ``JAXCLP_*`` variables read at trace time (``JAXCLP_NO_FFI``,
``JAXCLP_GPU_SPMM``, ``JAXCLP_ROLLED_THREEFRY``). Anything it cannot key or export
exactly (an array on several devices, a PRNG key of an unnamed implementation, a static value without a stable
description, an output node it cannot describe, a call inside another trace) runs through plain ``jax.jit``
instead; typed PRNG keys cross the program's boundary as their raw data.

The store is on where JAX's persistent cache is (``jax_compilation_cache_dir`` set, as
:func:`jaxclp.enable_compilation_cache` and the ``jaxclp`` command do) and ``$JAXCLP_PROGRAM_STORE`` is not ``off``.
Its files are never executed or unpickled: a JSON header (the output's tree structure) and the serialized
StableHLO. A file that does not read back is written again.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Sequence

import jax
import jaxlib
import numpy as np

from jaxclp import _rng, sparse

try:  # the settings JAX's tracing reads (x64, matmul precision, PRNG, ...): part of jit's own cache key
    from jax._src.config import trace_context as _trace_context
except ImportError:  # pragma: no cover - a JAX without it: nothing is stored
    _trace_context = None

__all__ = ["stored_jit", "store_folder", "STORE_ENV"]

STORE_ENV = "JAXCLP_PROGRAM_STORE"
"""Environment variable: ``off`` (or ``0``, ``no``, ``false``) keeps every program on plain ``jax.jit``."""

FORMAT = 1
"""Version of the stored files' layout (part of every key)."""

_SUFFIX = ".jaxexport"
_OFF = ("0", "off", "no", "false", "none")
_lock = threading.RLock()  # one thread exports or reads a program at a time; the others then find it
_MISSING = object()
_OUTPUT_PACKAGES = ("jaxclp", "optax", "flax")  # the packages whose named tuples an output tree may hold


class _Unstorable(Exception):
    """A call that :func:`stored_jit` cannot key exactly: it runs through plain ``jax.jit``."""


def store_folder() -> Path | None:
    """The folder stored programs go to: ``programs`` inside JAX's persistent cache folder; None where that cache
    is off (no ``jax_compilation_cache_dir``, or ``jax_enable_compilation_cache`` False) or
    ``$JAXCLP_PROGRAM_STORE`` says ``off``."""
    cache = _cache_dir()
    return None if cache is None else Path(cache) / "programs"


def _cache_dir() -> str | None:
    """JAX's persistent cache folder where the store is on (:func:`store_folder`), else None."""
    cache = jax.config.jax_compilation_cache_dir
    if (not cache or not jax.config.jax_enable_compilation_cache
            or os.environ.get(STORE_ENV, "").strip().lower() in _OFF or not _can_serialize()):
        return None
    return cache


@functools.lru_cache(maxsize=1)
def _can_serialize() -> bool:
    """Whether :mod:`jax.export` can write and read programs here (it needs the ``flatbuffers`` package)."""
    return importlib.util.find_spec("flatbuffers") is not None  # a jaxclp dependency; the store is off without it


@functools.lru_cache(maxsize=1)
def _source_digest() -> str:
    """sha256 of every jaxclp source file (path and bytes): a changed line keys every program anew."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def _settings() -> tuple:
    """What tracing reads besides the arguments: JAX's trace context (the value jit keys its own cache by),
    jaxclp's sparse-product path and its PRNG hash switch (the ``JAXCLP_*`` variables read at trace time)."""
    if _trace_context is None:
        raise _Unstorable("this JAX has no trace context")
    return _trace_context(), sparse.trace_path(), _rng.enabled()


def _settings_text(settings: tuple) -> str:
    """:func:`_settings` as text that is the same in every process; raises _Unstorable where it cannot be."""
    ctx = []
    for v in settings[0]:
        if type(v).__name__ == "AxisEnv":  # the axes of an enclosing trace: a call there is not stored anyway
            continue
        r = repr(v)
        if " at 0x" in r:
            raise _Unstorable(f"a JAX setting without a stable description: {r}")
        ctx.append(r)
    return repr((ctx, settings[1:]))


def _describe(v: Any) -> str:
    """A stable description of a static argument's value (the same in every process); raises _Unstorable."""
    if v is None or isinstance(v, (bool, int, float, complex, str, bytes)):
        return f"{type(v).__name__}:{v!r}"
    if isinstance(v, (np.generic, np.dtype)):
        return f"{type(v).__name__}:{v!r}"
    if isinstance(v, enum.Enum):
        return f"{_qualified(type(v))}.{v.name}"
    if isinstance(v, tuple) and hasattr(v, "_fields"):
        return f"{_qualified(type(v))}(" + ",".join(f"{f}={_describe(getattr(v, f))}" for f in v._fields) + ")"
    if isinstance(v, (tuple, list)):
        return f"{type(v).__name__}(" + ",".join(_describe(x) for x in v) + ")"
    if isinstance(v, (frozenset, set)):
        return f"{type(v).__name__}(" + ",".join(sorted(_describe(x) for x in v)) + ")"
    if isinstance(v, dict):
        return "dict(" + ",".join(sorted(f"{_describe(k)}:{_describe(x)}" for k, x in v.items())) + ")"
    if isinstance(v, functools.partial):
        return (f"partial({_describe(v.func)},{_describe(v.args)},{_describe(dict(v.keywords))})")
    if inspect.isfunction(v) or inspect.isclass(v) or inspect.isbuiltin(v):
        return _qualified(v)
    raise _Unstorable(f"a static argument without a stable description: {type(v).__name__}")


def _qualified(obj) -> str:
    """``module:qualname`` of a jaxclp function or class (another package's could change without the key)."""
    module, name = getattr(obj, "__module__", None) or "", getattr(obj, "__qualname__", "")
    if not (module == "jaxclp" or module.startswith("jaxclp.")) or "<" in name:
        raise _Unstorable(f"{module}:{name} is not a jaxclp module-level function or class")
    return f"{module}:{name}"


def _aval(leaf) -> tuple:
    """``(shape, dtype, weak_type, PRNG implementation or None)`` of an argument leaf; raises _Unstorable for what
    the key cannot hold."""
    if isinstance(leaf, jax.Array):
        if len(leaf.sharding.device_set) != 1:
            raise _Unstorable("an array on several devices")
        a = leaf.aval
    else:
        a = jax.typeof(leaf)
    impl = None
    if jax.dtypes.issubdtype(a.dtype, jax.dtypes.extended):
        if not jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
            raise _Unstorable(f"an argument of dtype {a.dtype}")
        impl = _impl_name(leaf)
    return a.shape, a.dtype, a.weak_type, impl


def _impl_name(key) -> str:
    """The name of a typed PRNG key's implementation, if ``jax.random.wrap_key_data`` takes it back."""
    name = jax.random.key_impl(key)
    if not isinstance(name, str):
        raise _Unstorable(f"a PRNG key of an unnamed implementation: {name!r}")
    return name


def _device(leaves):
    """The device a call runs on: that of its committed array arguments, else JAX's default device."""
    for x in leaves:
        if isinstance(x, jax.Array) and x.committed:
            return next(iter(x.sharding.device_set))
    default = jax.config.jax_default_device
    if isinstance(default, str):
        return jax.devices(default)[0]
    return default if default is not None else jax.devices()[0]


def _key_data(leaves, avals):
    """The leaves with typed PRNG keys as their raw data (what the stored program takes)."""
    return [jax.random.key_data(x) if a[3] else x for x, a in zip(leaves, avals)]


# ------------------------------------------------------------------------ output structure as JSON (no pickle)
def _encode(obj) -> Any:
    """JSON of an output tree whose leaves are ``0`` (``jax.tree_util.tree_unflatten(treedef, [0] * n)``)."""
    if obj is None:
        return None
    if isinstance(obj, int) and not isinstance(obj, bool) and obj == 0:
        return 0
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        cls = type(obj)
        module = cls.__module__
        if module.split(".")[0] not in _OUTPUT_PACKAGES:
            raise _Unstorable(f"an output of type {module}.{cls.__qualname__}")
        return {"namedtuple": f"{module}:{cls.__qualname__}", "fields": [_encode(x) for x in obj]}
    if type(obj) in (tuple, list):
        return {type(obj).__name__: [_encode(x) for x in obj]}
    if type(obj) is dict and all(isinstance(k, str) for k in obj):
        return {"dict": [[k, _encode(obj[k])] for k in obj]}
    raise _Unstorable(f"an output node of type {type(obj).__name__}")


def _decode(obj) -> Any:
    """The tree :func:`_encode` described (leaves ``0``); classes only from jaxclp, optax and flax modules."""
    if obj is None or obj == 0:
        return obj
    if "namedtuple" in obj:
        module, name = obj["namedtuple"].split(":")
        if module.split(".")[0] not in _OUTPUT_PACKAGES:
            raise ValueError(f"stored output type {module}:{name} is not allowed")
        cls = importlib.import_module(module)
        for part in name.split("."):
            cls = getattr(cls, part)
        return cls(*[_decode(x) for x in obj["fields"]])
    if "tuple" in obj:
        return tuple(_decode(x) for x in obj["tuple"])
    if "list" in obj:
        return [_decode(x) for x in obj["list"]]
    return {k: _decode(v) for k, v in obj["dict"]}


class _Program:
    """A stored program: its exported form, the tree of its outputs (and which are PRNG keys, of which
    implementation) and its in-process jitted call."""

    def __init__(self, exported, out_tree, out_keys):
        self.exported, self.out_tree, self.out_keys = exported, out_tree, out_keys

        def run(*leaves):
            return exported.call(*leaves)

        run.__name__ = run.__qualname__ = exported.fun_name  # JAX's compile log names the function
        self.call = jax.jit(run)

    def __call__(self, leaves, avals):
        # committed to one device: a stored program's outputs are (its shardings are explicit), and a call with
        # uncommitted inputs (host arrays) would compile the program a second time
        device = _device(leaves)
        out = self.call(*[x if isinstance(x, jax.Array) and x.committed else jax.device_put(x, device)
                          for x in _key_data(leaves, avals)])
        out = [jax.random.wrap_key_data(x, impl=i) if i else x for x, i in zip(out, self.out_keys)]
        return jax.tree_util.tree_unflatten(self.out_tree, out)

    def shapes(self):
        structs = []
        for a, impl in zip(self.exported.out_avals, self.out_keys):
            if impl:  # the raw data's shape less the key's own trailing axes
                key = jax.eval_shape(lambda d: jax.random.wrap_key_data(d, impl=impl),
                                     jax.ShapeDtypeStruct(a.shape, a.dtype))
                structs.append(key)
            else:
                structs.append(jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type))
        return jax.tree_util.tree_unflatten(self.out_tree, structs)


def _flat_call(fun, names, tree, statics, impls, seen, *leaves):
    """``fun`` on the dynamic arguments ``names`` rebuilt from ``leaves`` (raw data where ``impls`` names a PRNG
    implementation) and the static ones, its outputs flattened, typed PRNG keys as raw data (the tree in
    ``seen["out"]``, the keys' implementations in ``seen["keys"]``)."""
    leaves = [jax.random.wrap_key_data(x, impl=i) if i else x for x, i in zip(leaves, impls)]
    out = fun(**dict(zip(names, jax.tree_util.tree_unflatten(tree, leaves))), **statics)
    flat, seen["out"] = jax.tree_util.tree_flatten(out)
    seen["keys"] = [_impl_name(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else None for x in flat]
    return [jax.random.key_data(x) if i else x for x, i in zip(flat, seen["keys"])]


class StoredJit:
    """``jax.jit(fun, static_argnames=...)`` whose lowered programs are kept in :func:`store_folder` (module
    docstring). Calls, ``lower``, ``trace``, ``eval_shape`` and ``clear_cache`` as ``jax.jit``'s; ``eval_shape``
    of a stored program reads its output shapes without tracing."""

    def __init__(self, fun: Callable, static_argnames: Sequence[str] = ()):
        self._fun = fun
        self._jit = jax.jit(fun, static_argnames=tuple(static_argnames))
        sig = inspect.signature(fun)
        kinds = {p.kind for p in sig.parameters.values()}
        if kinds - {inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY}:
            raise TypeError(f"stored_jit needs named parameters only; {fun.__qualname__} has *args, **kwargs or "
                            "positional-only ones")
        self._sig = sig
        self._static = tuple(n for n in sig.parameters if n in set(static_argnames))
        self._dynamic = tuple(n for n in sig.parameters if n not in set(static_argnames))
        self._programs: dict = {}
        functools.update_wrapper(self, fun)

    def __getattr__(self, name):  # lower, trace, clear_cache, ... of the plain jit
        return getattr(self._jit, name)

    def clear_cache(self) -> None:
        """Forgets this process's compiled and loaded programs (the stored files stay)."""
        self._programs.clear()
        self._jit.clear_cache()

    def _split(self, args, kwargs):
        bound = self._sig.bind(*args, **kwargs)
        bound.apply_defaults()
        statics = tuple((n, bound.arguments[n]) for n in self._static)
        leaves, tree = jax.tree_util.tree_flatten(tuple(bound.arguments[n] for n in self._dynamic))
        return statics, leaves, tree

    def _program(self, args, kwargs):
        """``(program, leaves, their avals)`` for this call, or None where it runs through plain jit."""
        cache = _cache_dir()
        if cache is None:
            return None
        try:
            statics, leaves, tree = self._split(args, kwargs)
            if any(isinstance(x, jax.core.Tracer) for x in leaves):
                return None
            avals = tuple(_aval(x) for x in leaves)
            memo = (statics, tree, avals, cache, _settings())
            prog = self._programs.get(memo, _MISSING)
        except Exception:  # _Unstorable, or arguments that do not bind (plain jit raises the user's error)
            return None
        if prog is _MISSING:
            with _lock:
                prog = self._programs.get(memo, _MISSING)
                if prog is _MISSING:
                    try:
                        prog = self._load_or_export(Path(cache) / "programs", memo, statics, tree, leaves)
                    except Exception:  # anything export or the disk refuse, remembered: this call runs plain jit
                        prog = None
                    self._programs[memo] = prog
        return (prog, leaves, avals) if prog is not None else None

    def _load_or_export(self, folder: Path, memo: tuple, statics, tree, leaves) -> _Program | None:
        statics_text = ",".join(f"{n}={_describe(v)}" for n, v in statics)
        tree_text = str(tree)
        if " at 0x" in tree_text:
            raise _Unstorable("an argument's tree without a stable description")
        avals = [[list(shape), str(dtype), bool(weak), impl] for shape, dtype, weak, impl in memo[2]]
        key = json.dumps([FORMAT, _qualified(self._fun), statics_text, tree_text, avals, _settings_text(memo[4]),
                          _source_digest(), jax.__version__, jaxlib.__version__, jax.default_backend()])
        path = folder / (hashlib.sha256(key.encode()).hexdigest() + _SUFFIX)
        prog = _read(path)
        if prog is not None:
            return prog
        seen: dict = {}
        impls = [a[3] for a in memo[2]]

        def flat(*flat_leaves):
            return _flat_call(self._fun, self._dynamic, tree, dict(statics), impls, seen, *flat_leaves)

        flat.__name__ = flat.__qualname__ = self._fun.__name__
        exported = jax.export.export(jax.jit(flat), disabled_checks=[
            jax.export.DisabledSafetyCheck.custom_call(t) for t in sparse.kernel_targets()])(
            *_key_data(leaves, memo[2]))
        out_tree = seen["out"]
        try:
            header = json.dumps({"out": _encode(jax.tree_util.tree_unflatten(out_tree, [0] * out_tree.num_leaves)),
                                 "keys": seen["keys"]})
            blob = exported.serialize()
        except _Unstorable:
            return None
        _write(path, header.encode() + b"\n" + bytes(blob))
        return _Program(exported, out_tree, seen["keys"])

    def __call__(self, *args, **kwargs):
        found = self._program(args, kwargs)
        if found is None:
            return self._jit(*args, **kwargs)
        prog, leaves, avals = found
        return prog(leaves, avals)

    def eval_shape(self, *args, **kwargs):
        """The outputs' ``jax.ShapeDtypeStruct``s: from the stored program where there is one (no tracing)."""
        found = self._program(args, kwargs)
        if found is None:
            return self._jit.eval_shape(*args, **kwargs)
        return found[0].shapes()


def _read(path: Path) -> _Program | None:
    """The program stored at ``path``; None where there is none or it does not read back."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        head, blob = data.split(b"\n", 1)
        header = json.loads(head)
        out_tree = jax.tree_util.tree_structure(_decode(header["out"]))
        keys = [k if isinstance(k, str) else None for k in header["keys"]]
        if len(keys) != out_tree.num_leaves:
            return None
        return _Program(jax.export.deserialize(bytearray(blob)), out_tree, keys)
    except Exception:  # a truncated or foreign file: exported again and written over
        return None


def _write(path: Path, data: bytes) -> None:
    """Writes ``data`` to ``path`` atomically (a reader sees the old file or the new one); errors are ignored:
    the program then runs from this process's export."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        pass


def stored_jit(fun: Callable | None = None, *, static_argnames: Sequence[str] = ()):
    """``jax.jit`` whose lowered programs are kept on disk beside JAX's persistent cache (module docstring).

    Args:
        fun: the function (named parameters only). Omitted: a decorator.
        static_argnames: as ``jax.jit``'s.

    Returns:
        a :class:`StoredJit` (callable as the jitted ``fun``).
    """
    if fun is None:
        return functools.partial(stored_jit, static_argnames=static_argnames)
    return StoredJit(fun, static_argnames)
