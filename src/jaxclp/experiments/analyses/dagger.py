"""clp_dagger: CLP and MLP with spectral and diffusion features appended (the paper's CLP†, following C&S).

Features of the † variant: ``[X, spectral, diffusion]``, where

* spectral: the ``num_eigenvectors`` (32) eigenvectors of the symmetric normalized Laplacian
  ``L = I − D^-1/2 A D^-1/2`` with the SMALLEST eigenvalues (= largest of ``D^-1/2 A D^-1/2``;
  ``scipy.sparse.linalg.eigsh``, deterministic start vector); isolated nodes get zero rows;
* diffusion: C&S's feature diffusion (``x <- x − alpha (I − Â) x``, 10 steps, alpha = 0.5,
  ``Â = D^-1/2 (A + I) D^-1/2``, as in the CLP authors' ``diffusion_feature.py``) applied to a rank-64 truncated
  SVD of X instead of X itself (our deviation: diffusing thousands of bag-of-words columns would double the
  MLP's input width and its cost on 2 CPU cores);

each appended column standardized (zero mean, unit variance; :attr:`DaggerConfig.block_scale` offers X's
mean column standard deviation instead). The two appended blocks are cached (:func:`dagger_blocks`), so a † dataset
is computed once per machine and can be carried to another one bit for bit. Both variants run through
:func:`jaxclp.experiments.runner.run` (dataset names ``<name>`` and ``<name>+dagger``), medium split.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from jaxclp.experiments import runner
from jaxclp.experiments.identity import dataset_sha256
from jaxclp.experiments.records import RESULTS_FILE
from jaxclp.experiments.analyses import common
from jaxclp.datasets import load, synthetic
from jaxclp.datasets.cache import atomic_savez
from jaxclp.datasets.fetch import processed_dir


@dataclasses.dataclass(frozen=True)
class DaggerConfig:
    datasets: tuple
    runs: int
    methods: tuple = ("mlp", "clp")
    split: str = "medium"
    epochs: int = 500
    seed: int = 0
    num_eigenvectors: int = 32
    svd_dim: int = 64
    diffusion_steps: int = 10
    diffusion_alpha: float = 0.5
    block_scale: str = "unit"
    """Scale of the appended (standardized) spectral and diffusion columns: ``"unit"`` (unit variance; the
    default, every committed † record) or ``"x_std"`` (the mean column standard deviation of X, so the 96 dense
    columns do not outweigh X's: binary bag-of-words columns have std ~0.17 on DBLP/ACM). Neither wins on
    validation everywhere (session 19, the runner's ``mlp`` on 5 splits, README "Homophily graphs"): ``"x_std"``
    is higher on DBLP sparse/medium (+3.9/+2.0 validation points), ``"unit"`` on ACM (+1.1/+0.2/+0.3) and DBLP
    dense (+0.2). Changing it changes every † dataset's arrays (their records become stale)."""


# Full: 10 splits, as the tables (twitch-en: 7126 nodes x 2545 dense features).
FULL_DAGGER = DaggerConfig(datasets=("acm", "dblp", "twitch-en", "twitch-ru"), runs=10)
QUICK_DAGGER = DaggerConfig(datasets=("quick-syn",), runs=2, epochs=20, num_eigenvectors=4, svd_dim=2)


def load_dataset(name, data_root=None):
    if name == "quick-syn":
        return synthetic(0.5, 4, num_classes=3, nodes_per_class=30, seed=0, name="quick-syn")
    return load(name, root=data_root)


def _adjacency(graph) -> sp.csr_matrix:
    a = graph.to_scipy("none").tocsr()
    a = a - sp.diags(a.diagonal())  # no self-loops
    a.eliminate_zeros()
    return ((a + a.T) * 0.5).tocsr()


def spectral_embedding(graph, k: int) -> np.ndarray:
    """(n, k) eigenvectors of ``I − D^-1/2 A D^-1/2`` with the k smallest eigenvalues (isolated nodes: 0 rows)."""
    a = _adjacency(graph)
    n = a.shape[0]
    deg = np.asarray(a.sum(axis=1)).ravel()
    dinv = np.where(deg > 0, 1.0 / np.sqrt(np.where(deg > 0, deg, 1.0)), 0.0)
    s = sp.diags(dinv) @ a @ sp.diags(dinv)
    k = min(k, n - 2)
    v0 = np.random.default_rng(0).standard_normal(n)
    vals, vecs = spla.eigsh(s, k=k, which="LA", v0=v0, tol=1e-8, maxiter=max(10000, 20 * n))
    order = np.argsort(-vals)
    return vecs[:, order]


def diffusion_embedding(graph, x: np.ndarray, dim: int, steps: int = 10, alpha: float = 0.5) -> np.ndarray:
    """C&S feature diffusion ``z <- z − alpha (I − Â) z`` of a rank-``dim`` truncated SVD of ``x``.

    ``x`` may be dense or scipy.sparse (the SVD then runs on the sparse matrix; nothing is densified but the
    (n, dim) result).
    """
    x = x.astype(np.float64) if sp.issparse(x) else np.asarray(x, np.float64)
    if x.shape[1] > dim:
        u, s, _ = spla.svds(x, k=dim, random_state=0)
        z = u * s
    else:
        z = x.toarray() if sp.issparse(x) else x.copy()
    a = _adjacency(graph) + sp.eye(x.shape[0], format="csr")
    deg = np.asarray(a.sum(axis=1)).ravel()
    dinv = 1.0 / np.sqrt(deg)
    ahat = (sp.diags(dinv) @ a @ sp.diags(dinv)).tocsr()
    for _ in range(steps):
        z = z - alpha * (z - ahat @ z)
    return z


def standardize(z: np.ndarray) -> np.ndarray:
    mu, sd = z.mean(0), z.std(0)
    return ((z - mu) / np.where(sd > 0, sd, 1.0)).astype(np.float32)


def block_scale(x, how: str) -> float:
    """The factor of the appended standardized columns (:attr:`DaggerConfig.block_scale`): 1.0 for ``"unit"``; for
    ``"x_std"`` the mean over X's columns of their standard deviation (dense or CSR ``x``; 1.0 if that is 0)."""
    if how == "unit":
        return 1.0
    if how != "x_std":
        raise ValueError(f"block_scale must be 'unit' or 'x_std'; got {how!r}")
    if sp.issparse(x):
        x = sp.csr_matrix(x, dtype=np.float64)
        m = np.asarray(x.mean(axis=0)).ravel()
        sd = np.sqrt(np.maximum(np.asarray(x.multiply(x).mean(axis=0)).ravel() - m * m, 0.0))
    else:
        sd = np.asarray(x, np.float64).std(axis=0)
    s = float(sd.mean())
    return s if s > 0 else 1.0


BLOCKS_VERSION = 1
"""Version of the :func:`dagger_blocks` cache entries (part of their key)."""

_RECIPE_FIELDS = ("num_eigenvectors", "svd_dim", "diffusion_steps", "diffusion_alpha", "block_scale")


def _base_features(ds):
    """X as the † features use it: the runner's node features, a sparse X kept CSR float32."""
    x, kind = runner.node_features(ds)
    if sp.issparse(ds.features):  # keep a sparse X sparse (the runner densifies small ones itself)
        x = sp.csr_matrix(ds.features, dtype=np.float32)
    return x, kind


def blocks_key(ds, cfg: DaggerConfig) -> str:
    """Cache key of ``ds``'s † blocks: the cache version, the recipe (:data:`_RECIPE_FIELDS` of ``cfg``) and the
    sha256 of the source dataset's arrays (graph, labels, features, published splits)."""
    recipe = {f: getattr(cfg, f) for f in _RECIPE_FIELDS}
    blob = json.dumps({"v": BLOCKS_VERSION, "recipe": recipe, "source": dataset_sha256(ds)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _compute_blocks(ds, x, cfg: DaggerConfig) -> tuple[np.ndarray, np.ndarray, dict]:
    t0 = time.perf_counter()
    spec = spectral_embedding(ds.graph, cfg.num_eigenvectors)
    t1 = time.perf_counter()
    diff = diffusion_embedding(ds.graph, x, cfg.svd_dim, cfg.diffusion_steps, cfg.diffusion_alpha)
    t2 = time.perf_counter()
    scale = block_scale(x, cfg.block_scale)
    spec, diff = [(scale * standardize(b)).astype(np.float32) for b in (spec, diff)]
    return spec, diff, {"block_scale": scale, "spectral_seconds": t1 - t0, "diffusion_seconds": t2 - t1}


def dagger_blocks(ds, cfg: DaggerConfig, cache=True) -> tuple[np.ndarray, np.ndarray, dict]:
    """The two appended blocks of ``ds``'s † features: (n, num_eigenvectors) spectral and (n, svd_dim) diffusion
    columns, float32, standardized and scaled (:attr:`DaggerConfig.block_scale`), and an info dict.

    They come from the host's scipy (ARPACK ``eigsh``, ``svds``), whose bits differ between machines (another
    numpy/BLAS), and the runner identifies a derived dataset by a hash of its arrays: computed on two machines,
    one † dataset would be two configurations. So the blocks are cached as ``<cache>/dagger/<name>+dagger-<key>.npz``
    (:func:`blocks_key`; numeric arrays only, written atomically, the entry's own name recorded and checked): the
    first computation is reused on later calls, and a cache folder carried to another machine (e.g. ``JAXCLP_CACHE``
    pointing at it there) gives that machine the same arrays, hence the same configuration.

    Args:
        ds: the source :class:`~jaxclp.datasets.Dataset`.
        cfg: the recipe (:class:`DaggerConfig`).
        cache: True for ``$JAXCLP_CACHE`` (default ``<user cache dir>/_processed``), a directory, or False to
            compute without caching. An unreadable or foreign entry is recomputed with a warning.
    """
    return _blocks(ds, _base_features(ds)[0], cfg, cache)


def _blocks(ds, x, cfg: DaggerConfig, cache) -> tuple[np.ndarray, np.ndarray, dict]:
    """:func:`dagger_blocks` with X (:func:`_base_features`) given."""
    if cache is False:
        spec, diff, info = _compute_blocks(ds, x, cfg)
        return spec, diff, dict(info, from_cache=False)
    key = blocks_key(ds, cfg)
    path = processed_dir(cache) / "dagger" / f"{ds.name}+dagger-{key}.npz"
    if path.exists():
        try:
            with np.load(path, allow_pickle=False) as z:
                meta = json.loads(bytes(z["meta"]).decode())
                if meta.get("entry") != path.stem:
                    raise ValueError(f"the entry was written as {meta.get('entry')!r}, not {path.stem!r}")
                spec, diff = z["spectral"], z["diffusion"]
            if spec.shape[0] != ds.num_nodes or diff.shape[0] != ds.num_nodes:
                raise ValueError(f"{spec.shape[0]}/{diff.shape[0]} rows for {ds.num_nodes} nodes")
            return spec, diff, dict(meta["info"], from_cache=True)
        except Exception as e:  # noqa: BLE001  (damaged, foreign or old entry: recompute)
            warnings.warn(f"{path}: not served ({e}); recomputing the † blocks", stacklevel=2)
    spec, diff, info = _compute_blocks(ds, x, cfg)
    meta = {"entry": path.stem, "version": BLOCKS_VERSION, "info": info}
    atomic_savez(path, spectral=spec, diffusion=diff, meta=np.frombuffer(json.dumps(meta).encode(), np.uint8))
    return spec, diff, dict(info, from_cache=False)


def dagger_dataset(ds, cfg: DaggerConfig, cache=True):
    """``ds`` with ``[X, spectral, diffusion]`` features, named ``<name>+dagger``; also returns an info dict
    (dimensions, the block scale, the seconds the blocks took where computed). ``cache``: as
    :func:`dagger_blocks`."""
    x, kind = _base_features(ds)
    spec, diff, binfo = _blocks(ds, x, cfg, cache)
    blocks = [spec, diff]
    if sp.issparse(x):  # deezer-europe, Coauthor Physics: keep X sparse, append the 2 dense blocks as CSR
        feats = sp.hstack([x.astype(np.float32)] + [sp.csr_matrix(b) for b in blocks], format="csr")
    else:
        feats = np.hstack([x] + blocks).astype(np.float32)
    info = {"base_features": kind, "base_dim": int(x.shape[1]), **binfo,
            "spectral_dim": int(spec.shape[1]),
            "diffusion_dim": int(diff.shape[1]), "dagger_dim": int(feats.shape[1])}
    return dataclasses.replace(ds, name=f"{ds.name}+dagger", features=feats), info


def clp_dagger(out: Path, *, runs=10, datasets=None, data_root=None, argv=None, quick: bool | None = None,
               progress: bool = True) -> list[Path]:
    """MLP vs MLP† and CLP vs CLP† on acm, dblp, twitch-en, twitch-ru (medium split, 10 splits)."""
    t0 = time.perf_counter()
    quick = common.resolve_quick(quick)
    cfg = QUICK_DAGGER if quick else FULL_DAGGER
    if datasets:
        cfg = dataclasses.replace(cfg, datasets=tuple(datasets))
    nruns = min(cfg.runs, runs)
    fig_dir = common.figures_dir(out)
    prefix = "clp_dagger_quick" if quick else "clp_dagger"
    rec_dir = common.records_dir(fig_dir, prefix)
    per_ds = {}
    for name in cfg.datasets:
        ds = load_dataset(name, data_root)
        dds, info = dagger_dataset(ds, cfg)
        for d in (ds, dds):
            runner.run(d, cfg.split, cfg.methods, nruns, rec_dir, seed=cfg.seed, epochs=cfg.epochs,
                       progress=progress, argv=argv)
        results = common.last_results(rec_dir / RESULTS_FILE)
        row = {"metric": ds.metric, "features": info}
        for m in cfg.methods:
            a = common.test_scores(results, ds.name, cfg.split, m, nruns)
            b = common.test_scores(results, dds.name, cfg.split, m, nruns)
            row[m] = common.mean_std(a) | {"values": a}
            row[m + "_dagger"] = common.mean_std(b) | {"values": b}
            d = [y - x for x, y in zip(a, b)]
            row[m + "_dagger_minus_plain"] = common.mean_std(d) | {"values": d}
        per_ds[ds.name] = row
    md_path = fig_dir / f"{prefix}.md"
    md_path.write_text(_markdown(per_ds, cfg, nruns))
    png = _plot(per_ds, cfg, nruns, fig_dir / f"{prefix}.png")
    data = {"target": "clp_dagger", "quick": quick,
            "command": " ".join(argv or ["jaxclp", "reproduce", "clp_dagger"]), "config": dataclasses.asdict(cfg),
            "runs_cap": runs, "records": str(rec_dir / RESULTS_FILE),
            "std": "sample std (ddof=1) over splits; differences are paired per split",
            "wall_seconds_this_invocation": time.perf_counter() - t0, "datasets": per_ds}
    return [common.write_json(fig_dir / f"{prefix}.json", data), md_path, png]


def _markdown(per_ds, cfg, nruns) -> str:
    lines = [f"## CLP† (spectral + diffusion features), {cfg.split} split, {nruns} splits", "",
             "Test score in percent (accuracy; ROC-AUC for twitch), mean ± std (n); † = features "
             f"[X, {cfg.num_eigenvectors} Laplacian eigenvectors, diffusion of a rank-{cfg.svd_dim} SVD of X]; "
             "Δ = † − plain, paired per split.", "",
             "| dataset | metric | MLP | MLP† | Δ MLP | CLP | CLP† | Δ CLP |",
             "|---|---|---|---|---|---|---|---|"]
    for name, r in per_ds.items():
        cells = []
        for m in cfg.methods:
            cells += [common.fmt_pm(r[m]), common.fmt_pm(r[m + "_dagger"]),
                      common.fmt_pm(r[m + "_dagger_minus_plain"]).replace(" (", " (n=")]
        lines.append(f"| {name} | {r['metric']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _plot(per_ds, cfg, nruns, path):
    plt = common.pyplot()
    names = list(per_ds)
    bars = [(m, suffix) for m in cfg.methods for suffix in ("", "_dagger")]
    fig, ax = plt.subplots(figsize=(max(6, 2.4 * len(names)), 3.8))
    w = 0.8 / len(bars)
    for b, (m, suffix) in enumerate(bars):
        means = [100 * (per_ds[n][m + suffix]["mean"] or np.nan) for n in names]
        stds = [100 * (per_ds[n][m + suffix]["std"] or 0.0) for n in names]
        color = common.METHOD_STYLE[m][0]
        ax.bar(np.arange(len(names)) + (b - (len(bars) - 1) / 2) * w, means, w, yerr=stds, capsize=2, color=color,
               alpha=1.0 if suffix else 0.45, hatch="//" if suffix else None, edgecolor="k", linewidth=0.4,
               label=common.METHOD_LABELS[m] + ("†" if suffix else ""))
    ax.set_xticks(np.arange(len(names)), [f"{n}\n({per_ds[n]['metric']})" for n in names])
    lo = np.nanmin([100 * (per_ds[n][m + s]["mean"] or np.nan) for n in names for m, s in bars])
    ax.set_ylim(max(0, lo - 15), 100)
    ax.set_ylabel("test score (%)")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8, ncol=len(bars))
    ax.set_title(f"CLP† / MLP† with spectral + diffusion features ({cfg.split}, mean ± std over {nruns} splits)",
                 fontsize=10)
    fig.tight_layout()
    return common.save_figure(fig, path)
