"""``jaxclp explain --plot``: the neighbourhood drawn (networkx layout, matplotlib Agg), and one-line errors."""

import numpy as np
import pytest

import jaxclp
from jaxclp.experiments import cli
from jaxclp.experiments.explanations import neighbourhood
from files import explain_files


def _files(tmp_path):
    return explain_files(tmp_path) + ["--epochs", "20", "--priors", "mlp"]


def test_plot_writes_a_png(tmp_path, capsys):
    import matplotlib.image

    out = tmp_path / "figs" / "why.png"  # the folder is created
    assert cli.main(_files(tmp_path) + ["--node", "n3", "--node", "n20", "--plot", str(out)]) == 0
    assert str(out) in capsys.readouterr().out
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = matplotlib.image.imread(out)
    assert img.shape[1] == 2 * int(4.2 * 80) and img.shape[0] == int(4.5 * 80)  # two panels, 80 dpi
    assert img[..., :3].std() > 0.05  # something drawn


@pytest.mark.parametrize("bad, message", [("why.jpg", "name a .png file"), ("blocker/why.png", "is a file, not a "
                                                                                              "folder"),
                                          ("folder.png", "is a folder")])
def test_plot_bad_path_is_one_line(tmp_path, capsys, bad, message):
    (tmp_path / "blocker").write_text("x")
    (tmp_path / "folder.png").mkdir()
    assert cli.main(_files(tmp_path) + ["--node", "n3", "--plot", str(tmp_path / bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("jaxclp: error: --plot") and message in err and len(err.splitlines()) == 1


def test_neighbourhood_order_and_cap():
    # a path 0 - 1 - 2 - 3 - 4 and a star 2 - 5, 2 - 6: within 2 hops of 2 everything but nothing beyond
    g = jaxclp.Graph.from_edge_index(np.array([[0, 1, 2, 3, 2, 2], [1, 2, 3, 4, 5, 6]]), 8)
    c = np.array([0.1, 0.3, 0.5, 0.2, 0.4, 0.05, 0.3, 0.9])  # node 7 is isolated: never drawn
    train = np.array([1, 0, 0, 1, 1, 0, 1, 1], bool)
    # labelled first by term (4: 0.4, 6: 0.3, 3: 0.2, 0: 0.1), then unlabelled by term (1: 0.3, 5: 0.05)
    np.testing.assert_array_equal(neighbourhood(g, 2, c, train), [2, 4, 6, 3, 0, 1, 5])
    np.testing.assert_array_equal(neighbourhood(g, 2, c, train, max_nodes=3), [2, 4, 6])
    np.testing.assert_array_equal(neighbourhood(g, 2, c, train, max_hops=1), [2, 6, 3, 1, 5])
