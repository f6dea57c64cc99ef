"""JAX's persistent compilation cache for jaxclp's programs: :func:`enable_compilation_cache`.

A fit compiles its XLA programs once per process (seconds per graph shape and method); with the cache on, a
second Python process on the same machine reads them from disk instead. ``import jaxclp`` changes no global JAX
setting, so the library turns the cache on only when asked; ``jaxclp run``/``predict``/``reproduce`` call
:func:`enable_compilation_cache` themselves (``$JAXCLP_XLA_CACHE``, ``off`` to disable it).
"""

from __future__ import annotations

import os
from pathlib import Path

import jax

from jaxclp.datasets.fetch import user_cache_dir

__all__ = ["enable_compilation_cache", "compilation_cache_dir", "CACHE_ENV", "MIN_COMPILE_SECONDS"]

CACHE_ENV = "JAXCLP_XLA_CACHE"
"""Environment variable naming the cache folder (``off``, ``0``, ``none`` or empty: no cache)."""

MIN_COMPILE_SECONDS = 0.0
"""Cache every executable: most of a run's ~130 compilations are small (20-150 ms) and were recompiled by every
process under JAX's default 1 s / our former 0.2 s threshold (warm ``jaxclp run`` on Texas 11.5 -> 7.9 s,
``benchmarks/results/compile_time.md``)."""

_OFF = ("", "0", "off", "none", "false", "no")


def compilation_cache_dir(environ=None) -> Path | None:
    """The cache folder :func:`enable_compilation_cache` uses without ``path``: ``$JAXCLP_XLA_CACHE``, default
    ``<user cache dir>/xla`` (e.g. ``~/.cache/jaxclp/xla``); None where the variable says ``off`` (or ``0``,
    ``none``, empty)."""
    v = (os.environ if environ is None else environ).get(CACHE_ENV)
    if v is not None and v.strip().lower() in _OFF:
        return None
    return Path(v).expanduser() if v else user_cache_dir() / "xla"


def enable_compilation_cache(path: str | os.PathLike | None = None, *,
                             min_compile_seconds: float = MIN_COMPILE_SECONDS) -> Path | None:
    """Turns on JAX's persistent compilation cache, so that another Python process reuses the compiled programs.

    Sets the global JAX options ``jax_compilation_cache_dir`` and ``jax_persistent_cache_min_compile_time_secs``
    (for the whole process: call it once, before the first fit). ``import jaxclp`` never does this.

    Args:
        path: the cache folder (created by JAX on first write). None: :func:`compilation_cache_dir`
            (``$JAXCLP_XLA_CACHE``, else ``<user cache dir>/xla``, the folder the ``jaxclp`` command uses).
        min_compile_seconds: cache only programs whose compilation took at least this long (default 0: all).

    Returns:
        The folder now in use, or None where ``path`` is None and ``$JAXCLP_XLA_CACHE`` is ``off`` (nothing
        changed).

    Example:
        >>> import jaxclp
        >>> jaxclp.enable_compilation_cache()  # doctest: +SKIP
        PosixPath('/home/me/.cache/jaxclp/xla')
    """
    folder = compilation_cache_dir() if path is None else Path(path).expanduser()
    if folder is None:
        return None
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_seconds))
    return folder
