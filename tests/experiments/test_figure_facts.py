"""The figures' findings (jaxclp.experiments.figure_facts) on hand-made figure data."""

from pathlib import Path

import pytest

from jaxclp.experiments import figure_facts as ff


def _row(h, method, mean, features="gaussian", graph="Syn-1", split="medium", values=None):
    return {"features": features, "graph": graph, "split": split, "h": h, "method": method, "mean": mean,
            "values": values or [mean]}


def test_fig4_margins_and_counts():
    rows = [_row(0.2, "mlp", 0.60), _row(0.2, "clp_mlp", 0.62), _row(0.2, "lp", 0.50),  # best by 2 points
            _row(0.3, "mlp", 0.60), _row(0.3, "clp_mlp", 0.61), _row(0.3, "cs", 0.65),  # not best: -4
            _row(0.4, "mlp", 0.6), _row(0.4, "clp_mlp", 0.7), _row(0.4, "gcn", 0.69),
            _row(1.0, "mlp", 0.6), _row(1.0, "clp_mlp", 0.9), _row(1.0, "lp", 1.0),
            _row(0.0, "mlp", 0.3, "actor", "Syn-2"), _row(0.0, "clp_mlp", 0.32, "actor", "Syn-2"),
            _row(1.0, "lp", 0.97, "actor", "Syn-2"), _row(1.0, "clp_mlp", 0.99, "actor", "Syn-2")]
    f = ff.fig4({"rows": rows})
    assert (f["low.best"], f["low.cells"], f["h04.best"], f["h04.cells"]) == (1, 2, 1, 1)
    assert f["low.margin_min"] == pytest.approx(-4.0) and f["low.margin_max"] == pytest.approx(2.0)
    assert f["h03.over_mlp_min"] == pytest.approx(1.0) and f["h1.over_mlp_max"] == pytest.approx(30.0)
    assert f["h1.best_other_min"] == pytest.approx(100.0) and f["actor.h0.over_mlp.Syn-2"] == pytest.approx(2.0)
    assert f["actor.h1.min"] == pytest.approx(97.0) and "actor.h0.over_mlp.Syn-3" not in f


def test_fig5_wins_every_split_from_the_first_h_after_the_last_loss():
    rows = []
    for h, mlp, clp in [(0.0, [0.5, 0.5], [0.6, 0.4]), (0.5, [0.5, 0.5], [0.6, 0.7]), (0.6, [0.5, 0.5], [0.5, 0.9]),
                        (0.7, [0.5, 0.5], [0.6, 0.6]), (1.0, [0.5, 0.5], [0.9, 0.9])]:
        rows += [_row(h, "mlp", 0.5, values=mlp), _row(h, "clp", sum(clp) / 2, values=clp)]
    f = ff.fig5({"rows": rows})
    assert f["wins_every_split_from_h"] == 0.7  # h = 0.6 has a tie (0.5 vs 0.5): not a win
    assert f["h0.5.clp_minus_mlp"] == pytest.approx(15.0) and f["h0.clp_minus_mlp"] == pytest.approx(0.0)


def test_clp_dagger_paired_losses():
    ds = {"mlp_dagger_minus_plain": {"mean": 0.02}, "clp": {"values": [0.8, 0.8, 0.8]},
          "clp_dagger": {"values": [0.7, 0.9, 0.75]}}
    f = ff.clp_dagger({"datasets": {"acm": ds}})
    assert f["acm.clp_losses"] == 2 and f["acm.clp"] == pytest.approx(-5.0 / 3) and f["mlp_gain_max"] == pytest.approx(2.0)


def test_the_committed_figures_give_every_fact():
    facts = ff.facts(Path(__file__).resolve().parents[2])
    assert facts["fig4.low.cells"] == 18 and facts["fig1.wiki.bins"] == 11
    assert all(isinstance(v, (int, float)) for v in facts.values())
