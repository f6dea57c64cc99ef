"""The figures' findings as numbers, computed from the committed figure data (``results/figures/<target>.json``):
what the figures page says in words, generated (``<!-- n:figure:NAME -->``, :mod:`jaxclp.experiments.page_values`).

Every function takes the parsed JSON of one figure and returns ``{name: number}``; scores are in percent (the
data hold fractions). :func:`facts` gathers all of them, each name prefixed by its figure (``fig4.h1.clp_min``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np

FIGURES = ("fig1", "fig4", "fig5", "fig6", "fig7", "clp_dagger")


def _cells(rows, features: str) -> dict:
    """``(graph, split, h) -> {method: mean %}`` of Fig. 4's rows with ``features``."""
    out: dict = defaultdict(dict)
    for r in rows:
        if r["features"] == features:
            out[(r["graph"], r["split"], float(r["h"]))][r["method"]] = 100 * r["mean"]
    return out


def fig4(data: dict, method: str = "clp_mlp") -> dict:
    """Fig. 4 (Gaussian features unless named): where CLP on its MLP prior has the best mean, by how much, and the
    end points h = 0 (Actor's features) and h = 1."""
    cells = _cells(data["rows"], "gaussian")
    out = {}

    def margins(hs):
        ms = []
        for (g, s, h), m in sorted(cells.items()):
            if h in hs:
                ms.append(m[method] - max(v for k, v in m.items() if k != method))
        return np.asarray(ms)

    low = margins((0.2, 0.3))
    out |= {"low.best": int((low > 0).sum()), "low.cells": low.size, "low.margin_min": low.min(),
            "low.margin_max": low.max()}
    over = np.asarray([m[method] - m["mlp"] for (g, s, h), m in cells.items() if h == 0.3])
    out |= {"h03.over_mlp_min": over.min(), "h03.over_mlp_max": over.max()}
    mid = margins((0.4,))
    out |= {"h04.best": int((mid > 0).sum()), "h04.cells": mid.size}
    top = [m for (g, s, h), m in cells.items() if h == 1.0]
    gain = np.asarray([m[method] - m["mlp"] for m in top])
    own = np.asarray([m[method] for m in top])
    best_other = np.asarray([max(v for k, v in m.items() if k != method) for m in top])
    out |= {"h1.over_mlp_min": gain.min(), "h1.over_mlp_max": gain.max(), "h1.clp_min": own.min(),
            "h1.clp_max": own.max(), "h1.best_other_min": best_other.min(), "h1.best_other_max": best_other.max()}
    actor = _cells(data["rows"], "actor")
    for g in ("Syn-1", "Syn-2", "Syn-3"):
        m = actor.get((g, "medium", 0.0))
        if m:
            out[f"actor.h0.over_mlp.{g}"] = m[method] - m["mlp"]
            out[f"actor.h0.best.{g}"] = int(m[method] >= max(m.values()))
    at1 = [v for (g, s, h), m in actor.items() if h == 1.0 and s == "medium"
           for k, v in m.items() if k in ("lp", "cs", "gcn", method)]
    out |= {"actor.h1.min": min(at1), "actor.h1.max": max(at1)}
    return out


def fig5(data: dict) -> dict:
    """Fig. 5 (Syn-1): ``clp`` minus the MLP per h (paired over the splits) and from which h it wins every split."""
    values: dict = defaultdict(dict)
    for r in data["rows"]:
        values[float(r["h"])][r["method"]] = 100 * np.asarray(r["values"])
    out, wins_all = {}, []
    for h in sorted(values):
        d = values[h]["clp"] - values[h]["mlp"]
        out[f"h{h:g}.clp_minus_mlp"] = float(d.mean())
        wins_all.append((h, bool((d > 0).all())))
    from_h = None
    for h, won in reversed(wins_all):
        if not won:
            break
        from_h = h
    out["wins_every_split_from_h"] = from_h
    return out


def fig1(data: dict) -> dict:
    """Fig. 1: per node-homophily bin, where ``clp`` has the best mean and its accuracy at h_v = 0."""
    out = {}
    for name, ds in data["datasets"].items():
        ms = {m: 100 * np.asarray(v["accuracy_mean"], float) for m, v in ds["methods"].items()}
        grid = np.vstack(list(ms.values()))
        filled = ~np.isnan(grid).any(0)
        best = np.nanargmax(np.where(np.isnan(grid), -np.inf, grid), axis=0)
        clp_row = list(ms).index("clp")
        out[f"{name}.clp_best_bins"] = int(((best == clp_row) & filled).sum())
        out[f"{name}.bins"] = int(filled.sum())
        for m in ("clp", "mlp", "gcn"):
            out[f"{name}.h0.{m}"] = float(ms[m][0])
        counts = np.asarray(ds["methods"]["mlp"]["count_per_run"], float).mean(0)
        bins = np.asarray(ds["bins"], float)
        out[f"{name}.low_share"] = 100 * counts[bins <= 0.2].sum() / counts.sum()
        high = bins >= 0.7
        gain = ms["clp"][high] - ms["mlp"][high]
        out |= {f"{name}.high.over_mlp_min": float(gain.min()), f"{name}.high.over_mlp_max": float(gain.max()),
                f"{name}.high_share": 100 * counts[high].sum() / counts.sum()}
    return out


def fig6(data: dict, method: str = "clp_mlp") -> dict:
    """Fig. 6: CLP on its MLP prior minus the MLP over the label rates (paired per split): range, and the fewest
    splits won at any rate (from 5 % labels on as well)."""
    out = {}
    for name, ds in data["datasets"].items():
        gains, wins, wins5 = [], [], []
        for r in ds["rows"]:
            d = 100 * (np.asarray(r[method]["values"]) - np.asarray(r["mlp"]["values"]))
            gains.append(d.mean())
            wins.append(int((d > 0).sum()))
            if r["train_fraction"] >= 0.05:
                wins5.append(int((d > 0).sum()))
        out |= {f"{name}.over_mlp_min": min(gains), f"{name}.over_mlp_max": max(gains),
                f"{name}.fewest_wins": min(wins), f"{name}.fewest_wins_from_5": min(wins5),
                f"{name}.splits": len(ds["rows"][0]["mlp"]["values"])}
    return out


def fig7(data: dict) -> dict:
    """Fig. 7: CLP's own seconds per split on its fixed MLPs, and the accuracy ranges the page quotes."""
    rows = data["rows"]
    prop = [r["propagation_seconds"]["mean"] for r in rows if r["model"] == "clp"]
    out = {"clp_seconds_min": min(prop), "clp_seconds_max": max(prop)}
    wis = [100 * r["test"]["mean"] for r in rows if r["dataset"] == "wisconsin" and r["model"] in ("mlp", "clp")]
    out |= {"wisconsin.mlp_clp_min": min(wis), "wisconsin.mlp_clp_max": max(wis)}
    two = [r for r in rows if r["dataset"] == "brazil-airports" and r["variant"] == "2-layer"
           and r["model"] in ("mlp", "clp", "gcn")]
    out |= {"brazil.two_layer_min": min(100 * r["test"]["mean"] for r in two),
            "brazil.two_layer_max": max(100 * r["test"]["mean"] for r in two),
            "brazil.two_layer_std_min": min(100 * r["test"]["std"] for r in two),
            "brazil.two_layer_std_max": max(100 * r["test"]["std"] for r in two)}
    brazil = [r for r in rows if r["dataset"] == "brazil-airports"]
    best = max(brazil, key=lambda r: r["test"]["mean"])
    out |= {"brazil.best_is_h2gcn": int(best["model"] == "h2gcn"), "brazil.best": 100 * best["test"]["mean"]}
    return out


def clp_dagger(data: dict) -> dict:
    """CLP†: what the spectral + diffusion features add to the MLP and to ``clp`` (paired per split)."""
    out = {}
    mlp_gain = []
    for name, ds in data["datasets"].items():
        mlp_gain.append(100 * ds["mlp_dagger_minus_plain"]["mean"])
        d = np.asarray(ds["clp_dagger"]["values"]) - np.asarray(ds["clp"]["values"])
        out |= {f"{name}.clp": 100 * float(d.mean()), f"{name}.clp_losses": int((d < 0).sum()),
                f"{name}.splits": d.size}
    out |= {"mlp_gain_min": min(mlp_gain), "mlp_gain_max": max(mlp_gain)}
    return out


def facts(root: Path) -> dict:
    """Every figure's facts, ``"<figure>.<name>" -> number``, from ``root/results/figures/<figure>.json``."""
    out = {}
    for fig in FIGURES:
        data = json.loads((Path(root) / "results" / "figures" / f"{fig}.json").read_text())
        out |= {f"{fig}.{k}": v for k, v in globals()[fig](data).items()}
    return out
