"""``load`` and ``available``: the entry points of the data layer."""

from __future__ import annotations

import warnings

from jaxclp.datasets._base import Dataset, build_dataset
from jaxclp.datasets.cache import cache_key, cache_path, load_raw, save_raw
from jaxclp.datasets.fetch import data_root, fetch, processed_dir
from jaxclp.datasets.registry import REGISTRY, canonical_name, get_spec
from jaxclp.datasets.synthetic import SYNTHETIC_DEGREES, synthetic

__all__ = ["load", "available"]


def available(synthetic: bool = False) -> list[str]:
    """Names accepted by :func:`load`.

    Args:
        synthetic: also list the synthetic names ``syn-1``, ``syn-2``, ``syn-3`` (they need ``h=...``).

    Returns:
        Sorted list of registered dataset names (whether or not their files are present locally).
    """
    names = sorted(REGISTRY)
    return names + sorted(SYNTHETIC_DEGREES) if synthetic else names


def load(name: str, root=None, download: bool = True, *, base_url=None, directed: bool = False,
         self_loops: str = "drop", deduplicate: bool = True, sparse_features: bool | None = None, cache=True,
         include_optional: bool = False, **options) -> Dataset:
    """Loads a dataset by name.

    Files are looked up under ``root`` (default ``$JAXCLP_DATA`` or the user cache directory, layout
    ``<root>/<folder>/<file>``), downloaded if missing, sha256-verified, parsed, and the parsed form is cached
    in ``$JAXCLP_CACHE`` (default ``<user cache dir>/_processed``; never inside ``root``, which may be a shared
    read-only copy) so later loads skip parsing (and never read the raw files).

    Args:
        name: a name from :func:`available` (case-insensitive; aliases such as ``film``, ``twitch-engb``,
            ``roman_empire`` accepted), or ``syn-1``/``syn-2``/``syn-3`` (avg degree 5/10/15) with ``h=...``
            and other :func:`jaxclp.datasets.synthetic` keywords.
        root: data root directory.
        download: download missing files (else FileNotFoundError saying where to put them).
        base_url: mirror replacing the canonical URL prefix: files are fetched from
            ``<base_url>/<relative path>`` (also ``$JAXCLP_DATA_URL``; ``file://`` URLs work).
        directed: keep the direction of the file's edges (default: undirected, both directions stored).
        self_loops: ``"drop"`` (default), ``"keep"`` (the file's loops) or ``"add"`` (one loop per node).
        deduplicate: merge repeated edges (default True).
        sparse_features: True: features as a scipy CSR matrix; False: dense; None (default): CSR for sparse
            features whose dense float32 form would exceed 256 MiB (deezer-europe, Coauthor CS and Physics), else
            dense.
        cache: True (default) to use and write the processed cache in ``$JAXCLP_CACHE`` or
            ``<user cache dir>/_processed``; a directory to use that one instead; False for no cache.
        include_optional: also download the files a registry entry marks optional (none at present; the
            deezer-europe features are fetched by default since their hash is published).
        **options: format options, e.g. ``vocab="global"`` for Twitch (3170 shared feature columns instead of
            the ids used by the language).

    Returns:
        :class:`Dataset`: ``graph`` (n nodes), ``features`` (n, d) float32 or None, ``labels`` (n,) int32,
        ``num_classes``, ``splits`` (published fixed splits, shape (num_splits, n), or None), ``metric``.
        (``features`` may be a scipy CSR matrix, see ``sparse_features``.)

    Raises:
        ValueError: unknown name or option (the message lists the valid ones), checksum mismatch, bad file.
        FileNotFoundError: files missing and ``download=False``.
    """
    key = canonical_name(name)
    if key in SYNTHETIC_DEGREES:
        if "h" not in options:
            raise ValueError(f"synthetic dataset {name!r} needs h=<edge homophily in [0, 1]>")
        options.setdefault("avg_degree", SYNTHETIC_DEGREES[key])
        options.setdefault("name", f"{key}-h{float(options['h']):.2f}")
        return synthetic(**options)
    spec = get_spec(name)
    unknown = set(options) - set(spec.options)
    if unknown:
        raise ValueError(f"unknown option(s) {sorted(unknown)} for dataset {spec.name!r}; "
                         f"valid options: {dict(spec.options) or 'none'}")
    opts = {**spec.options, **options}
    rootp = data_root(root)
    if self_loops not in ("drop", "keep", "add"):
        raise ValueError(f"self_loops must be 'drop', 'keep' or 'add'; got {self_loops!r}")
    graph_opts = dict(directed=directed, self_loops=self_loops, deduplicate=deduplicate,
                      sparse_features=sparse_features)

    paths = None
    if include_optional:
        paths = fetch(spec, root, download=download, base_url=base_url, include_optional=True)
    cdir = processed_dir(cache) if cache else None
    ckey = cache_key(spec, rootp, opts) if cache else None
    if ckey is not None:
        cpath = cache_path(cdir, spec.name, ckey)
        if cpath.exists():
            try:
                raw = load_raw(cpath)
            except Exception as err:  # damaged cache entry: rebuild it
                warnings.warn(f"ignoring damaged processed cache {cpath}: {err}", stacklevel=2)
                cpath.unlink(missing_ok=True)
            else:
                return build_dataset(raw, spec.name, spec.metric, info={"cache": str(cpath)}, **graph_opts)
    if paths is None:
        paths = fetch(spec, root, download=download, base_url=base_url)
    raw = spec.builder(paths, **opts)
    info = {"files": {role: (None if p is None else str(p)) for role, p in paths.items()}}
    if cache:
        ckey = ckey or cache_key(spec, rootp, opts)
        if ckey is not None:
            try:
                save_raw(cache_path(cdir, spec.name, ckey), raw)
            except OSError as err:  # read-only cache directory: still return the data
                warnings.warn(f"could not write the processed cache under {cdir}: {err}", stacklevel=2)
    return build_dataset(raw, spec.name, spec.metric, info=info, **graph_opts)
