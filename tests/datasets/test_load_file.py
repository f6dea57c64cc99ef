"""jaxclp.datasets.load_file: a user's graph from an .npz (Platonov or Shchur layout) or an edge list + labels."""

import re
import warnings

import numpy as np
import pytest
import scipy.sparse as sps

from jaxclp import datasets as D
from jaxclp.datasets.files import read_labels_file
from jaxclp.graph import edge_values


def _platonov(path, n=6, with_masks=True):
    rng = np.random.default_rng(0)
    arrays = dict(node_features=rng.random((n, 3)).astype(np.float32), node_labels=np.array([0, 1, 2, 0, 1, 2])[:n],
                  edges=np.array([[0, 1], [1, 2], [2, 3], [4, 5]]))
    if with_masks:
        tr = np.zeros((2, n), bool)
        tr[:, :2] = True
        va = np.zeros((2, n), bool)
        va[:, 2:4] = True
        arrays.update(train_masks=tr, val_masks=va, test_masks=~(tr | va))
    np.savez(path, **arrays)
    return arrays


def test_platonov_npz_with_published_masks(tmp_path):
    a = _platonov(tmp_path / "mine.npz")
    ds = D.load_file(tmp_path / "mine.npz")
    assert ds.name == "mine" and ds.num_nodes == 6 and ds.num_classes == 3
    np.testing.assert_array_equal(ds.features, a["node_features"])
    np.testing.assert_array_equal(ds.labels, a["node_labels"])
    assert ds.num_undirected_edges == 4 and ds.graph.num_edges == 8  # symmetrized
    np.testing.assert_array_equal(D.published_splits(ds).train, a["train_masks"])
    np.testing.assert_array_equal(ds.splits.test, a["test_masks"])
    d = D.load_file(tmp_path / "mine.npz", directed=True, name="x")
    assert d.name == "x" and d.graph.num_edges == 4


def test_shchur_npz(tmp_path):
    adj = sps.csr_matrix(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], np.float32))
    attr = sps.csr_matrix(np.array([[1, 0], [0, 2], [3, 0]], np.float32))
    np.savez(tmp_path / "s.npz", adj_data=adj.data, adj_indices=adj.indices, adj_indptr=adj.indptr,
             adj_shape=np.array(adj.shape), attr_data=attr.data, attr_indices=attr.indices,
             attr_indptr=attr.indptr, attr_shape=np.array(attr.shape), labels=np.array([1, 0, 1]))
    ds = D.load_file(tmp_path / "s.npz")
    np.testing.assert_array_equal(ds.features, attr.toarray())
    np.testing.assert_array_equal(ds.labels, [1, 0, 1])
    assert ds.num_undirected_edges == 2 and ds.splits is None


def test_npz_wrong_keys_and_pickle(tmp_path):
    np.savez(tmp_path / "w.npz", x=np.zeros(3), y=np.ones(3))
    with pytest.raises(ValueError, match=r"w\.npz: unknown \.npz layout, keys \['x', 'y'\].*Platonov.*Shchur"):
        D.load_file(tmp_path / "w.npz")
    a = _platonov(tmp_path / "p.npz")
    np.savez(tmp_path / "p.npz", **{**a, "node_labels": np.array([0, 1, 2, 0, 1, None], dtype=object)})
    with pytest.raises(ValueError, match=r"p\.npz.*pickle"):
        D.load_file(tmp_path / "p.npz")
    np.savez(tmp_path / "r.npz", **{**a, "edges": np.array([[0, 1], [1, 9]])})
    with pytest.raises(ValueError, match=r"r\.npz: edges reference nodes outside \[0, 6\)"):
        D.load_file(tmp_path / "r.npz")
    np.savez(tmp_path / "c.npz", **{**a, "node_labels": np.arange(5)})
    with pytest.raises(ValueError, match=r"c\.npz: node_features has 6 rows but node_labels has 5"):
        D.load_file(tmp_path / "c.npz")
    with pytest.raises(ValueError, match=r"features= and weighted= apply to an edge-list.*labels= may replace"):
        D.load_file(tmp_path / "p.npz", features=tmp_path / "p.npz")


def test_labels_file_replaces_the_labels_of_an_npz(tmp_path, capsys):
    """``labels=`` with a .npz: its rows (node index, label) replace the file's own labels, a node it does not list
    is unlabelled, and a warning says both; ids outside 0..n-1 or not integers are refused, naming the way out."""
    a = _platonov(tmp_path / "mine.npz")
    lab = tmp_path / "fixed.csv"
    lab.write_text("node,label\n0,b\n1,a\n2,a\n3,b\n5,a\n")  # node 4's label hidden
    with pytest.warns(UserWarning) as caught:
        ds = D.load_file(tmp_path / "mine.npz", labels=lab)
    notes = [str(w.message) for w in caught]
    assert any("fixed.csv: these labels replace the labels of" in t and "mine.npz" in t
               and "node ids = its node indices 0..5" in t and "the 1 of its 6 nodes the file does not list are "
               "unlabelled" in t for t in notes), notes
    assert ds.labels.tolist() == [1, 0, 0, 1, -1, 0] and ds.num_classes == 2
    assert ds.label_values.tolist() == ["a", "b"]
    np.testing.assert_array_equal(ds.features, a["node_features"])  # the graph and features stay the file's
    assert ds.num_undirected_edges == 4 and ds.info["files"]["labels"] == str(lab) and ds.name == "mine"
    one_per_line = tmp_path / "y.txt"
    one_per_line.write_text("1\n1\n0\n0\n1\n0\n")  # one label per line: nodes 0..5
    with pytest.warns(UserWarning, match="these labels replace") as caught:
        ds = D.load_file(tmp_path / "mine.npz", labels=one_per_line)
    assert ds.labels.tolist() == [1, 1, 0, 0, 1, 0]
    assert not any("does not list" in str(w.message) for w in caught)
    bad = tmp_path / "bad.csv"
    bad.write_text("0,a\n1,b\n9,a\n")
    with pytest.raises(ValueError, match=r"bad\.csv: 1 node id\(s\) outside the nodes 0\.\.5 of .*mine\.npz, "
                                         r"e\.g\. \[9\]; a labels file for a platonov npz names its nodes by index"):
        D.load_file(tmp_path / "mine.npz", labels=bad)
    bad.write_text("n0,a\nn1,b\n")
    with pytest.raises(ValueError, match=r"bad\.csv: node ids must be the node indices 0\.\.5 of"):
        D.load_file(tmp_path / "mine.npz", labels=bad)


def test_cli_labels_with_an_npz_graph_prints_one_note(tmp_path, capsys, monkeypatch):
    """``jaxclp run --graph g.npz --labels L``: accepted; the replacement is one line on stderr."""
    import sys

    from jaxclp.experiments import cli

    def show(message, category, filename, lineno, file=None, line=None):  # as outside pytest: printed to stderr
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    monkeypatch.setattr(warnings, "showwarning", show)

    _platonov(tmp_path / "mine.npz", with_masks=False)
    lab = tmp_path / "y.csv"
    lab.write_text("0,0\n1,1\n2,0\n3,1\n4,0\n5,1\n")
    assert cli.main(["run", "--graph", str(tmp_path / "mine.npz"), "--labels", str(lab), "--plan"]) == 0
    err = capsys.readouterr().err
    notes = [ln for ln in err.splitlines() if "these labels replace" in ln]
    assert len(notes) == 1 and notes[0].startswith("jaxclp: warning: ") and "y.csv" in notes[0], err


def test_edge_list_with_ids_and_string_labels(tmp_path):
    e = tmp_path / "g.csv"
    e.write_text("src,dst\n700,500\n500,900\n900,700\n")  # header, ids not 0..n-1
    lab = tmp_path / "labels.csv"
    lab.write_text("node,label\n900,cat\n700,dog\n500,cat\n")
    ds = D.load_file(e, labels=lab)
    np.testing.assert_array_equal(ds.node_ids, [900, 700, 500])  # index = row of the labels file
    assert ds.info["label_values"] == ["cat", "dog"]
    np.testing.assert_array_equal(ds.labels, [0, 1, 0])
    assert ds.features is None and ds.num_undirected_edges == 3 and ds.name == "g"
    assert D.edge_homophily(ds.graph, ds.labels) == pytest.approx(1 / 3)
    x, kind = D.node_features(ds)
    assert kind == "log-degree"
    np.testing.assert_allclose(x[:, 0], np.log(3.0))


def test_edge_list_tsv_one_label_per_line_directed_and_features(tmp_path):
    e = tmp_path / "g.tsv"
    e.write_text("0\t1\n1\t2\n2\t0\n2\t3\n")
    lab = tmp_path / "y.txt"
    lab.write_text("1\n0\n1\n1\n")
    feats = np.arange(8, dtype=np.float32).reshape(4, 2)
    np.save(tmp_path / "x.npy", feats)
    ds = D.load_file(e, labels=lab, features=tmp_path / "x.npy", directed=True)
    assert ds.graph.num_edges == 4 and not ds.graph.symmetric
    np.testing.assert_array_equal(ds.labels, [1, 0, 1, 1])
    np.testing.assert_array_equal(ds.features, feats)
    sps.save_npz(tmp_path / "x.npz", sps.csr_matrix(feats))
    np.testing.assert_array_equal(D.load_file(e, labels=lab, features=tmp_path / "x.npz").features, feats)
    (tmp_path / "x.csv").write_text("f0,f1\n" + "".join(f"{a},{b}\n" for a, b in feats))
    np.testing.assert_array_equal(D.load_file(e, labels=lab, features=tmp_path / "x.csv").features, feats)


def test_edge_list_errors_name_file_and_line(tmp_path):
    e = tmp_path / "g.csv"
    lab = tmp_path / "y.csv"
    lab.write_text("0\n1\n0\n")
    e.write_text("0,1\n1,2\n2,7\n")
    with pytest.raises(ValueError, match=r"g\.csv: 1 node id\(s\) out of range \[0, 3\).*y\.csv.*\[7\]"):
        D.load_file(e, labels=lab)
    e.write_text("0,1\n1,x\n")
    with pytest.raises(ValueError, match=r"g\.csv: line 2: node id must be an integer; got 'x'"):
        D.load_file(e, labels=lab)
    e.write_text("0,1\n2\n")
    with pytest.raises(ValueError, match=r"g\.csv: line 2: expected 2 node ids"):
        D.load_file(e, labels=lab)
    e.write_text("0,1\n")
    with pytest.raises(ValueError, match="needs labels="):
        D.load_file(e)
    lab2 = tmp_path / "y2.csv"
    lab2.write_text("node,label\n10,0\n11,1\nabc,0\n")
    with pytest.raises(ValueError, match=r"y2\.csv: line 4: node id must be an integer; got 'abc'"):
        D.load_file(e, labels=lab2)
    lab2.write_text("10,0\n11,1\n")
    with pytest.raises(ValueError, match=r"node id\(s\) that are not in y2\.csv, e\.g\. \[0, 1\]"):
        D.load_file(e, labels=lab2)
    np.save(tmp_path / "x.npy", np.zeros((2, 2)))
    with pytest.raises(ValueError, match=r"x\.npy: 2 feature rows but the labels file defines 3 nodes; give one row "
                                         r"per node of the graph \(3 rows, "):
        D.load_file(e, labels=lab, features=tmp_path / "x.npy")
    (tmp_path / "x.csv").write_text("1,2\n3,oops\n5,6\n")
    with pytest.raises(ValueError, match=r"x\.csv: line 2: non-numeric"):
        D.load_file(e, labels=lab, features=tmp_path / "x.csv")
    with pytest.raises(FileNotFoundError, match="labels file"):
        D.load_file(e, labels=tmp_path / "missing.csv")


def test_labels_file_duplicates(tmp_path):
    e = tmp_path / "g.csv"
    e.write_text("0,1\n1,2\n")
    lab = tmp_path / "y.csv"
    lab.write_text("0,1\n1,0\n2,1\n1,0\n")
    with pytest.warns(UserWarning, match=r"y\.csv: 1 node id\(s\) listed more than once with the same label"):
        ds = D.load_file(e, labels=lab)
    np.testing.assert_array_equal(ds.labels, [1, 0, 1])
    lab.write_text("0,1\n1,0\n2,1\n1,1\n")
    with pytest.raises(ValueError, match=r"y\.csv: 1 node id\(s\) listed more than once with different labels "
                                         r"\(1: \[0, 1\]\)"):
        D.load_file(e, labels=lab)


def test_edge_list_loops_and_repeated_lines_warn(tmp_path):
    """Self-loop lines are dropped and exact repeats merged (the default graph options), with one warning that
    counts both and names a loop's node by its id; both directions of an edge are the usual layout: no warning."""
    lab = tmp_path / "y.csv"
    lab.write_text("a,0\nb,1\nc,0\nd,1\n")
    e = tmp_path / "g.csv"
    e.write_text("a,b\nb,a\nb,c\nc,c\nb,c\nb,c\nd,d\n")  # 2 loops (c, d); "b,c" listed 3 times: 2 repeats
    with pytest.warns(UserWarning, match=r"g\.csv: 2 self-loop line\(s\) dropped \(e\.g\. node c\); 2 line\(s\) "
                                         r"repeat an edge listed earlier and were merged into it$"):
        ds = D.load_file(e, labels=lab)
    assert ds.graph.num_edges == 4  # a-b and b-c, both directions; no loops
    e.write_text("0,1\n1,0\n1,2\n")
    lab.write_text("0,0\n1,0\n2,0\n3,1\n4,1\n5,1\n")  # two classes of 3 (nodes 3-5 isolated)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert D.load_file(e, labels=lab).graph.num_edges == 4
    e.write_text("0,1,0.5\n0,1,2.0\n")
    with pytest.warns(UserWarning, match=r"1 line\(s\) repeat an edge listed earlier and were merged into it "
                                         r"\(its largest weight kept\)$"):
        D.load_file(e, labels=lab, weighted=True)


def test_labels_of_one_class_are_refused(tmp_path):
    """A labels file whose labelled nodes all hold one class (or none) is refused with the file and the label:
    no split can train or select a classifier on it (the runner's per-split message named a seed)."""
    e = tmp_path / "g.csv"
    e.write_text("a,b\nb,c\n")
    lab = tmp_path / "y.csv"
    lab.write_text("a,cat\nb,cat\nc,?\n")
    with pytest.raises(ValueError, match=r"y\.csv: every labelled node \(2\) has label 'cat'; a classifier needs "
                                         r"labelled nodes of at least two classes"), \
            pytest.warns(UserWarning, match="1 of 3 node"):  # the unlabelled node is reported before the refusal
        D.load_file(e, labels=lab)
    lab.write_text("a,?\nb,-1\nc,?\n")
    with pytest.raises(ValueError, match=r"y\.csv: every node is unlabelled"):  # refused before, by the parser
        D.load_file(e, labels=lab)


def test_small_classes_warn_and_describe(tmp_path):
    """Classes with fewer than 3 labelled nodes are named (label value and count) in one warning; describe() is
    the hand-counted one-line summary (isolated and unlabelled nodes, unique edges, per-class counts)."""
    lab = tmp_path / "y.csv"
    lab.write_text("".join(f"n{i},{c}\n" for i, c in enumerate(["ant"] * 3 + ["bee"] * 2 + ["cat"] + ["?"])))
    e = tmp_path / "g.csv"
    e.write_text("n0,n1\nn1,n2\nn2,n3\nn1,n0\n")  # n4, n5, n6 isolated
    with pytest.warns(UserWarning) as rec:
        ds = D.load_file(e, labels=lab)
    msgs = [str(r.message) for r in rec]
    assert any(re.search(r"y\.csv: 2 class\(es\) with fewer than 3 labelled nodes, label \(count\): bee \(2\), "
                         r"cat \(1\); no split can put one in each of train, validation", m) for m in msgs)
    assert any("1 of 7 node(s) have label -1" in m for m in msgs) and len(msgs) == 2
    assert ds.describe() == ("g: 7 nodes (3 isolated, 1 unlabelled), 3 undirected edges, no features, 3 classes "
                             "(labelled nodes per class: ant=3, bee=2, cat=1), metric accuracy")
    with pytest.warns(UserWarning):
        d = D.load_file(e, labels=lab, directed=True)
    assert d.describe().startswith("g: 7 nodes (3 isolated, 1 unlabelled), 4 directed edges, no features")
    lab.write_text("".join(f"{i},{i % 13}\n" for i in range(40)))  # 13 classes: 4 of class 0, 3 of the others
    e.write_text("0,1\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every class has >= 3 labelled nodes: no warning
        ds = D.load_file(e, labels=lab)
    assert ds.describe().endswith("13 classes (labelled nodes per class: min 3 (class 1), median 3, max 4), "
                                  "metric accuracy")


def test_edge_list_unlabelled_nodes(tmp_path):
    """A label -1 (scikit-learn's convention), '?' or an empty field marks an unlabelled node: code -1 with a
    warning, not a class; the node stays in the graph; edge homophily counts only edges between labelled nodes."""
    e = tmp_path / "g.csv"
    e.write_text("0,1\n1,2\n2,3\n3,4\n4,0\n")
    lab = tmp_path / "y.csv"
    lab.write_text("0,5\n1,-1\n2,5\n3,7\n4,-1\n")
    with pytest.warns(UserWarning, match=r"y.csv: 2 of 5 node\(s\) have label -1, '\?', an empty label or a "
                                         r"missing-value token \(NA, nan, null, None\) and are treated as unlab"):
        ds = D.load_file(e, labels=lab)
    np.testing.assert_array_equal(ds.labels, [0, -1, 0, 1, -1])
    assert ds.num_classes == 2 and ds.info["label_values"] == [5, 7] and ds.num_nodes == 5
    assert float(D.edge_homophily(ds.graph, ds.labels)) == pytest.approx(0.0)  # only 2-3 has both ends labelled
    lab.write_text("node,label\n0,cat\n1,?\n2,dog\n3,cat\n4,cat\n")
    with pytest.warns(UserWarning, match="1 of 5"):
        ds = D.load_file(e, labels=lab)
    np.testing.assert_array_equal(ds.labels, [0, -1, 1, 0, 0])
    assert ds.info["label_values"] == ["cat", "dog"]
    assert float(D.edge_homophily(ds.graph, ds.labels)) == pytest.approx(2 / 3)  # 2-3 no, 3-4 yes, 4-0 yes
    for text in ("node,label\n0,cat\n1,\n2,dog\n3,cat\n4,cat\n", "0\tcat\n1\t\n2\tdog\n3\tcat\n4\tcat\n",
                 "0,cat\n1, \r\n2,dog\n3,cat\n4,cat\n"):  # an empty label field (pandas' missing value): unlabelled
        lab.write_text(text)
        with pytest.warns(UserWarning, match="1 of 5"):
            np.testing.assert_array_equal(D.load_file(e, labels=lab).labels, [0, -1, 1, 0, 0])
    lab.write_text("0,5\n1,\n2,5\n3,7\n4,\n")  # integer labels, the last row empty too
    with pytest.warns(UserWarning, match="2 of 5"):
        np.testing.assert_array_equal(D.load_file(e, labels=lab).labels, [0, -1, 0, 1, -1])
    # pandas' missing-value tokens (NA, nan, null, None, ...) were classes of their own; integer labels stay integers
    for text, want, values in (("0,5\n1,nan\n2,5\n3,7\n4,NA\n", [0, -1, 0, 1, -1], [5, 7]),
                               ("0,cat\n1,NULL\n2,dog\n3,None\n4,cat\n", [0, -1, 1, -1, 0], ["cat", "dog"]),
                               ("0,5\n1,?\n2,5\n3,7\n4,#N/A\n", [0, -1, 0, 1, -1], [5, 7])):
        lab.write_text(text)
        with pytest.warns(UserWarning, match="2 of 5"):
            ds = D.load_file(e, labels=lab)
        np.testing.assert_array_equal(ds.labels, want)
        assert ds.info["label_values"] == values
    lab.write_text("0,cat\n1,Unknown\n2,dog\n3,cat\n4,Unknown\n")  # a class named like a missing label: kept, said
    with pytest.warns(UserWarning, match=r"y.csv: label 'Unknown' is read as a class \(2 nodes\); if it marks"):
        assert D.load_file(e, labels=lab).info["label_values"] == ["Unknown", "cat", "dog"]
    lab.write_text("0,5\n1\n2,5\n3,7\n4,5\n")  # no separator: a malformed row, not a missing label
    with pytest.raises(ValueError, match="y.csv: line 2: expected 2 field"):
        D.load_file(e, labels=lab)
    lab.write_text("0,-1\n1,-1\n2,-1\n3,-1\n4,-1\n")
    with pytest.raises(ValueError, match="y.csv: every node is unlabelled"):
        D.load_file(e, labels=lab)


def test_edge_list_with_string_node_ids(tmp_path):
    """Ids that are not integers (none of the labels file's) are strings, mapped explicitly; a first line is a
    header when its label is no other row's (labels file) or neither of its ids is a node (edge list)."""
    e = tmp_path / "g.csv"
    lab = tmp_path / "y.csv"
    lab.write_text("user,team\nbob,red\nann,blue\ncy,red\ndee,blue\n")
    e.write_text("source,target\nann,bob\nbob,cy\ncy,dee\n")
    ds = D.load_file(e, labels=lab)
    np.testing.assert_array_equal(ds.node_ids, ["bob", "ann", "cy", "dee"])  # index = row of the labels file
    np.testing.assert_array_equal(ds.labels, [1, 0, 1, 0])                   # blue = 0, red = 1
    assert ds.info["label_values"] == ["blue", "red"] and ds.num_undirected_edges == 3
    und = {tuple(sorted(p)) for p in D.undirected_edges(ds.graph).T.tolist()}
    assert und == {(0, 1), (0, 2), (2, 3)}  # ann-bob, bob-cy, cy-dee
    lab.write_text("bob,red\nann,blue\ncy,red\ndee,blue\n")  # no headers: the first rows are data
    e.write_text("ann,bob\nbob,cy\ncy,dee\n")
    ds2 = D.load_file(e, labels=lab)
    np.testing.assert_array_equal(ds2.node_ids, ds.node_ids)
    np.testing.assert_array_equal(ds2.graph.senders, ds.graph.senders)
    e.write_text("ann,bob\nbob,zed\n")
    with pytest.raises(ValueError, match=r"edges of .*g\.csv contain 1 node id\(s\) that are not in y\.csv.*zed"):
        D.load_file(e, labels=lab)
    lab.write_text("bob,red\nann,?\ncy,red\ndee,blue\n")  # unlabelled nodes work with string ids too
    e.write_text("ann,bob\n")
    with pytest.warns(UserWarning, match="1 of 4"):
        ds3 = D.load_file(e, labels=lab)
    np.testing.assert_array_equal(ds3.labels, [1, -1, 1, 0])


def test_features_csv_keyed_by_string_node_ids(tmp_path):
    """With string node ids, a features CSV whose first column is the node id places each row by id (any order,
    header or not); a node without a row, a repeated or unknown id, a ragged row and an id column on a graph
    with integer ids are errors naming the file and the ids."""
    e, lab, f = tmp_path / "g.csv", tmp_path / "y.csv", tmp_path / "x.csv"
    lab.write_text("bob,red\nann,blue\ncy,red\n")
    e.write_text("ann,bob\nbob,cy\n")
    f.write_text("node,f1,f2\ncy,3,30\nbob,1,10\nann,2,20\n")
    ds = D.load_file(e, labels=lab, features=f)
    np.testing.assert_array_equal(ds.node_ids, ["bob", "ann", "cy"])
    np.testing.assert_array_equal(ds.features, [[1, 10], [2, 20], [3, 30]])  # by id, not by row
    f.write_text("cy,3,30\nbob,1,10\nann,2,20\n")  # no header
    np.testing.assert_array_equal(D.load_file(e, labels=lab, features=f).features, ds.features)
    for text, msg in [("cy,3,30\nbob,1,10\n", r"x\.csv: 1 of 3 nodes have no features row, e\.g\. \['ann'\]"),
                      ("cy,3,30\nbob,1,10\nann,2,20\nbob,1,11\n", r"x\.csv: 1 node id\(s\) have more than one.*bob"),
                      ("cy,3,30\nbob,1,10\nann,2,20\nzed,0,0\n", r"x\.csv: the features rows' ids contain 1 node.*zed"),
                      ("cy,3,30\nbob,1\nann,2,20\n", r"x\.csv: line 2: expected a node id and 2 numbers"),
                      ("cy,3,30\nbob,1,ten\nann,2,20\n", r"x\.csv: line 2: non-numeric value")]:
        f.write_text(text)
        with pytest.raises(ValueError, match=msg):
            D.load_file(e, labels=lab, features=f)
    lab.write_text("10,red\n20,blue\n30,red\n")  # integer ids: an id column of strings is refused
    e.write_text("10,20\n")
    f.write_text("n10,1,2\nn20,3,4\nn30,5,6\n")
    msg = r"x\.csv: line 1: the first column holds non-numeric ids \('n10'\) but the graph's node ids are integers"
    with pytest.raises(ValueError, match=msg):
        D.load_file(e, labels=lab, features=f)
    lab.write_text("0,red\n1,blue\n2,red\n")  # ids 0..n-1
    e.write_text("0,1\n")
    with pytest.raises(ValueError, match=msg):
        D.load_file(e, labels=lab, features=f)


@pytest.mark.parametrize("fmt", ["npy", "npz", "csv"])
def test_features_with_nan_or_inf_name_the_nodes(tmp_path, fmt):
    """NaN/inf in a features file (dense, CSR or text) is an error naming how many values and which nodes, by the
    user's ids."""
    import scipy.sparse as sp

    e, lab = tmp_path / "g.csv", tmp_path / "y.csv"
    lab.write_text("bob,red\nann,blue\ncy,red\ndee,blue\n")
    e.write_text("ann,bob\nbob,cy\ncy,dee\n")
    x = np.arange(12, dtype=np.float32).reshape(4, 3) + 1
    x[1, 2], x[3, 0], x[3, 1] = np.nan, np.inf, -np.inf
    f = tmp_path / f"x.{fmt}"
    if fmt == "npy":
        np.save(f, x)
    elif fmt == "npz":
        sp.save_npz(f, sp.csr_matrix(x))
    else:
        f.write_text("\n".join(f"{i},{a},{b},{c}" for i, (a, b, c) in zip(["bob", "ann", "cy", "dee"], x)))
    with pytest.raises(ValueError, match=r"x\.%s: features contain NaN or inf: 3 value\(s\) in 2 node\(s\)' rows, "
                                         r"e\.g\. node\(s\) \['ann', 'dee'\]" % fmt):
        D.load_file(e, labels=lab, features=f)
    if fmt == "npz":  # a Platonov-layout graph .npz with the same features: nodes are rows there
        g = tmp_path / "graph.npz"
        np.savez(g, node_features=x, node_labels=np.array([0, 1, 0, 1]), edges=np.array([[0, 1], [1, 2], [2, 3]]))
        with pytest.raises(ValueError, match=r"graph\.npz: features contain NaN or inf: 3 value\(s\) in 2 node\(s\)' "
                                             r"rows, e\.g\. node\(s\) \[1, 3\]"):
            D.load_file(g)
    x[1, 2], x[3, 0], x[3, 1] = 0.5, 1, 2
    if fmt == "npy":
        np.save(f, x)
        np.testing.assert_array_equal(D.load_file(e, labels=lab, features=f).features, x)


def test_weighted_edge_list(tmp_path):
    """``weighted=True``: the third column is the edge weight; both directions of an undirected edge carry it, a
    repeated edge keeps its largest weight, and the symmetric normalization is the weighted one (numpy)."""
    e = tmp_path / "g.csv"
    e.write_text("u,v,w\n0,1,2.0\n1,2,0.5\n2,3,4\n1,0,3\n")
    lab = tmp_path / "y.csv"
    lab.write_text("0\n1\n0\n1\n")
    ds = D.load_file(e, labels=lab, weighted=True)
    a = np.zeros((4, 4))
    for s, r, w in zip(*(np.asarray(v) for v in (ds.graph.senders, ds.graph.receivers, ds.graph.weights))):
        a[r, s] = w
    want = np.array([[0, 3, 0, 0], [3, 0, 0.5, 0], [0, 0.5, 0, 4], [0, 0, 4, 0]])  # 0-1 listed twice: max(2, 3)
    np.testing.assert_allclose(a, want)
    deg = want.sum(1)
    np.testing.assert_allclose(_dense(ds.graph, edge_values(ds.graph, "sym")),
                               want / np.sqrt(np.outer(deg, deg)), rtol=1e-6)
    with pytest.warns(UserWarning, match=r"the third column \('w'\) is ignored"):
        unweighted = D.load_file(e, labels=lab)
    assert np.all(np.asarray(unweighted.graph.weights) == 1) and unweighted.info["format"] == "edge list"
    assert ds.info["format"] == "weighted edge list"
    e.write_text("0,1,2\n1,2\n")
    with pytest.raises(ValueError, match=r"g\.csv: line 2: edge weight \(third column\) must be a number; got '<mis"):
        D.load_file(e, labels=lab, weighted=True)
    e.write_text("0,1,2\n1,2,-1\n")
    with pytest.raises(ValueError, match=r"g\.csv: line 2: edge weight must be finite and nonnegative; got -1"):
        D.load_file(e, labels=lab, weighted=True)
    e.write_text("0,1,nan\n")
    with pytest.raises(ValueError, match=r"line 1: edge weight must be finite"):
        D.load_file(e, labels=lab, weighted=True)


def _dense(graph, values):
    a = np.zeros((graph.num_nodes, graph.num_nodes))
    a[np.asarray(graph.receivers), np.asarray(graph.senders)] = np.asarray(values)
    return a


def test_npz_unlabelled_nodes(tmp_path):
    """In an npz (Platonov or Shchur layout) a label -1 marks an unlabelled node (warning); other negative labels
    raise; published masks may not hold an unlabelled node (the runner refuses them, naming the nodes)."""
    from jaxclp.experiments import runner

    a = _platonov(tmp_path / "u.npz")
    a["node_labels"] = np.array([0, 1, 2, 0, 1, -1])
    np.savez(tmp_path / "u.npz", **a)
    with pytest.warns(UserWarning, match=r"u\.npz: 1 of 6 node\(s\) have label -1"):
        ds = D.load_file(tmp_path / "u.npz")
    np.testing.assert_array_equal(ds.labels, [0, 1, 2, 0, 1, -1])
    with pytest.raises(ValueError, match=r"u: the published splits contain 1 unlabelled node\(s\).*\[5\]"):
        runner.get_splits(ds, "published", 2, 0)  # node 5 is a test node of the file's masks
    sp = runner.get_splits(ds, "dense", 3, 0)
    assert not (sp.train | sp.val | sp.test)[:, 5].any() and (sp.train | sp.val | sp.test)[:, :5].all()
    a["node_labels"] = np.array([0, 1, 2, 0, -2, 1])
    np.savez(tmp_path / "u.npz", **a)
    with pytest.raises(ValueError, match=r"u\.npz: negative labels other than -1.*\[-2\]"):
        D.load_file(tmp_path / "u.npz")
    adj = sps.csr_matrix(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=np.float32))
    np.savez(tmp_path / "s.npz", adj_data=adj.data, adj_indices=adj.indices, adj_indptr=adj.indptr,
             adj_shape=np.array(adj.shape), labels=np.array([-1, 0, 1]))
    with pytest.warns(UserWarning, match=r"s\.npz: 1 of 3"):
        assert D.load_file(tmp_path / "s.npz").labels.tolist() == [-1, 0, 1]


@pytest.mark.parametrize("text", [
    "0,1\n1,2\n2,3\n",                                     # plain CSV
    "# Directed graph: g.txt\n# FromNodeId\tToNodeId\n0\t1\n1\t2\n\n2\t3\n",  # SNAP: comments, TAB, blank line
    "src;dst;weight\r\n0;1;0.5\r\n1;2;2\r\n2;3;1e-3\r\n",  # header, semicolons, CRLF, a weight column
    "u v\n0 1 7 extra\n1 2 8 x\n2 3 9 y\n",                # header, spaces, further columns
    "0,1,1\n1,2\n2,3,1\n",                                 # ragged: the line-by-line reader takes it
    "0,1\n1,2.5\n",                                        # not an integer: both raise the same error
])
def test_edge_list_fast_reader_equals_the_line_by_line_one(tmp_path, monkeypatch, text):
    """numpy's C reader (the fast path) and the line-by-line reader give the same edges and weights, or the same
    error; comment lines (#) are skipped by both."""
    from jaxclp.datasets import files

    p = tmp_path / "g.txt"
    p.write_bytes(text.encode())

    def read_all():
        out = []
        for f in (files.read_edge_list, files.read_edge_weights, files.read_weighted_edge_list):
            try:
                got = f(p)
                out.extend(got if isinstance(got, tuple) else (got,))
            except ValueError as err:
                out.extend((str(err),) * (2 if f is files.read_weighted_edge_list else 1))
        return out

    fast = read_all()
    regular = "2.5" not in text  # a ragged weight column still has regular id columns
    assert (files._fast_columns(p, (0, 1), np.int64, 2) is not None) == regular  # the C reader took it
    monkeypatch.setattr(files, "_fast_columns", lambda *a, **k: None)
    slow = read_all()
    for a, b in zip(fast, slow):
        if isinstance(a, str) or isinstance(b, str):
            assert a == b
        else:
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)
    if "Directed" in text:
        np.testing.assert_array_equal(fast[0], [[0, 1, 2], [1, 2, 3]])
    # the one-pass weighted reader gives what the two separate readers give (edges or their error, then weights
    # or theirs; the first error wins when both fail)
    err = next((x for x in fast[:2] if isinstance(x, str)), None)
    for got, want in zip(fast[2:], (err, err) if err else fast[:2]):
        if isinstance(want, str):
            assert got == want
        else:
            np.testing.assert_array_equal(got, want)


def test_features_json_keyed_by_node_id_and_csv_fast_path(tmp_path, monkeypatch):
    """``.json`` features ({node id: [feature ids]}, the MUSAE layout) map through the labels file's ids (string
    ids too; a missing node gets a zero row; an unknown key raises); a CSV matrix reads the same through numpy's C
    reader and line by line."""
    from jaxclp.datasets import files

    e, lab = tmp_path / "g.csv", tmp_path / "y.csv"
    e.write_text("ann,bob\nbob,cy\n")
    lab.write_text("bob,red\nann,blue\ncy,red\n")
    (tmp_path / "f.json").write_text('{"cy": [7], "bob": [3, 7]}')  # ann has none
    ds = D.load_file(e, labels=lab, features=tmp_path / "f.json")
    np.testing.assert_array_equal(np.asarray(ds.features.todense() if hasattr(ds.features, "todense")
                                             else ds.features), [[1, 1], [0, 0], [0, 1]])  # columns: ids 3, 7
    (tmp_path / "f.json").write_text('{"zed": [1]}')
    with pytest.raises(ValueError, match=r"keys of f\.json contain 1 node id\(s\) that are not in y\.csv.*zed"):
        D.load_file(e, labels=lab, features=tmp_path / "f.json")
    lab.write_text("0\n1\n0\n")
    e.write_text("0,1\n1,2\n")
    (tmp_path / "f.json").write_text('{"2": [0], "0": [1]}')  # integer ids 0..n-1
    x = D.load_file(e, labels=lab, features=tmp_path / "f.json").features
    np.testing.assert_array_equal(np.asarray(x.todense() if hasattr(x, "todense") else x), [[0, 1], [0, 0], [1, 0]])
    (tmp_path / "f.csv").write_text("a b c\n1 2 3\n4\t5\t6\n\n# a comment\n7;8;9.5\n")
    fast = files.read_features_file(tmp_path / "f.csv", 3)
    monkeypatch.setattr(files, "_fast_columns", lambda *a, **k: None)
    slow = files.read_features_file(tmp_path / "f.csv", 3)
    np.testing.assert_array_equal(fast, slow)
    np.testing.assert_array_equal(fast, [[1, 2, 3], [4, 5, 6], [7, 8, 9.5]])
    assert fast.dtype == slow.dtype == np.float32


def test_dataset_label_values(tmp_path):
    e, lab = tmp_path / "g.csv", tmp_path / "y.csv"
    e.write_text("0,1\n1,2\n")
    lab.write_text("0,bee\n1,ant\n2,bee\n")
    ds = D.load_file(e, labels=lab)
    assert ds.label_values.tolist() == ["ant", "bee"] and ds.label_values[ds.labels].tolist() == ["bee", "ant", "bee"]
    assert D.synthetic(h=0.5, avg_degree=2, num_classes=3, nodes_per_class=4, seed=0).label_values.tolist() == [0, 1, 2]


def _write_plain_graph(tmp_path):
    """A 6-node edge list (no header) + labels + dense features, the reference for the encoded variants below."""
    edges = b"0,1\n1,2\n2,3\n3,4\n4,5\n5,0\n0,3\n"
    labels = b"0,a\n1,b\n2,a\n3,b\n4,a\n5,c\n"
    x = np.arange(18, dtype=np.float32).reshape(6, 3) / 7
    (tmp_path / "e.csv").write_bytes(edges)
    (tmp_path / "l.csv").write_bytes(labels)
    np.save(tmp_path / "x.npy", x)
    return edges, labels, x


@pytest.mark.parametrize("codec", ["gzip", "bz2", "xz"])
def test_compressed_text_files_read_as_the_plain_ones(tmp_path, codec):
    import bz2
    import gzip
    import io
    import lzma

    comp = {"gzip": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}[codec]
    edges, labels, x = _write_plain_graph(tmp_path)
    ref = D.load_file(tmp_path / "e.csv", labels=tmp_path / "l.csv", features=tmp_path / "x.npy")
    (tmp_path / "e.csv.z").write_bytes(comp(edges))       # recognized by content, not by name
    (tmp_path / "l.csv.gz").write_bytes(comp(labels))
    buf = io.BytesIO()
    np.save(buf, x)
    (tmp_path / "x.npy.gz").write_bytes(comp(buf.getvalue()))
    (tmp_path / "x.csv.gz").write_bytes(comp(b"".join(",".join(repr(float(v)) for v in r).encode() + b"\n"
                                                    for r in x)))
    for feats in ("x.npy.gz", "x.csv.gz"):
        ds = D.load_file(tmp_path / "e.csv.z", labels=tmp_path / "l.csv.gz", features=tmp_path / feats)
        np.testing.assert_array_equal(np.asarray(ds.graph.senders), np.asarray(ref.graph.senders))
        np.testing.assert_array_equal(np.asarray(ds.graph.receivers), np.asarray(ref.graph.receivers))
        np.testing.assert_array_equal(ds.labels, ref.labels)
        np.testing.assert_allclose(ds.features, x, rtol=1e-7)
        assert ds.name == "e"
    (tmp_path / "cut.csv.gz").write_bytes(comp(edges * 50)[:40])
    with pytest.raises(ValueError, match=f"cut.csv.gz: corrupt or truncated {codec} data"):
        D.load_file(tmp_path / "cut.csv.gz", labels=tmp_path / "l.csv")


def test_byte_order_marks_and_utf16_lose_no_row(tmp_path):
    """A UTF-8 BOM (Excel's "CSV UTF-8") once made a headerless file's first row a 'header': one edge, or the
    first label (then every id shifted), was silently dropped. UTF-16 text (Excel's "Unicode text") is read too."""
    edges, labels, _ = _write_plain_graph(tmp_path)
    ref = D.load_file(tmp_path / "e.csv", labels=tmp_path / "l.csv")
    bom = b"\xef\xbb\xbf"
    (tmp_path / "e_bom.csv").write_bytes(bom + edges)
    (tmp_path / "l_bom.csv").write_bytes(bom + labels)
    (tmp_path / "l16.csv").write_bytes(labels.decode().encode("utf-16"))
    (tmp_path / "e16.csv").write_bytes(("u,v\n" + edges.decode()).encode("utf-16"))
    for e, lab in (("e_bom.csv", "l.csv"), ("e.csv", "l_bom.csv"), ("e16.csv", "l16.csv")):
        ds = D.load_file(tmp_path / e, labels=tmp_path / lab)
        assert ds.graph.num_edges == ref.graph.num_edges == 14
        np.testing.assert_array_equal(ds.labels, ref.labels)
    (tmp_path / "e_cr.csv").write_bytes(edges.replace(b"\n", b"\r"))  # CR-only line ends (old Mac CSV)
    (tmp_path / "l_cr.csv").write_bytes(bom + labels.replace(b"\n", b"\r"))
    ds = D.load_file(tmp_path / "e_cr.csv", labels=tmp_path / "l_cr.csv")
    assert ds.graph.num_edges == 14
    np.testing.assert_array_equal(ds.labels, ref.labels)
    # one label per line, no header: the BOM sat on node 0's label
    (tmp_path / "one.csv").write_bytes(bom + b"0\n1\n0\n1\n0\n2\n")
    ds = D.load_file(tmp_path / "e.csv", labels=tmp_path / "one.csv")
    assert ds.num_nodes == 6
    np.testing.assert_array_equal(ds.labels, [0, 1, 0, 1, 0, 2])


def test_binary_and_archive_inputs_are_named_errors(tmp_path):
    import zipfile

    _write_plain_graph(tmp_path)
    (tmp_path / "blob.dat").write_bytes(b"0,a\n\x00\x01\x02")
    with pytest.raises(ValueError, match=r"blob\.dat: binary content \(a NUL byte at offset 4"):
        D.load_file(tmp_path / "e.csv", labels=tmp_path / "blob.dat")
    with zipfile.ZipFile(tmp_path / "e.zip", "w") as z:
        z.write(tmp_path / "e.csv", "e.csv")
    with pytest.raises(ValueError, match=r"e\.zip: a zip archive"):
        D.load_file(tmp_path / "e.zip", labels=tmp_path / "l.csv")
    (tmp_path / "e.zst").write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 20)
    with pytest.raises(ValueError, match=r"e\.zst: zstd-compressed"):
        D.load_file(tmp_path / "e.zst", labels=tmp_path / "l.csv")
    (tmp_path / "bad.json").write_bytes(b'{"0": [1, 2],')
    with pytest.raises(ValueError, match=r"bad\.json: not valid JSON"):
        D.load_file(tmp_path / "e.csv", labels=tmp_path / "l.csv", features=tmp_path / "bad.json")


def test_a_text_file_starting_like_bz2_is_text(tmp_path):
    """The bz2 magic needs its block header too: a labels file whose first id is 'BZh9...' is plain text."""
    from jaxclp.datasets._text import compression, read_text_bytes

    (tmp_path / "e.csv").write_bytes(b"BZh91,b\nb,c\n")
    (tmp_path / "l.csv").write_bytes(b"BZh91,x\nb,y\nc,x\n")
    assert compression(b"BZh91,x\n") is None
    assert read_text_bytes(tmp_path / "l.csv") == b"BZh91,x\nb,y\nc,x\n"
    ds = D.load_file(tmp_path / "e.csv", labels=tmp_path / "l.csv")
    assert ds.num_nodes == 3 and ds.graph.num_edges == 4


@pytest.mark.parametrize("what,name,says", [("graph", "g.graphml", "networkx/Gephi graph format"),
                                            ("graph", "g.pt", "never unpickles"),
                                            ("labels", "y.pkl", "never unpickles"),
                                            ("graph", "g.mat", "MATLAB file"),
                                            ("features", "x.parquet", "export it as CSV"),
                                            ("graph", "g.GraphML.gz", "networkx/Gephi graph format")])
def test_known_other_formats_are_refused_with_the_way_out(tmp_path, what, name, says):
    _write_plain_graph(tmp_path)
    (tmp_path / name).write_bytes(b"<?xml version='1.0'?>\n1,2\n")
    files = {"graph": tmp_path / "e.csv", "labels": tmp_path / "l.csv", "features": None, what: tmp_path / name}
    with pytest.raises(ValueError, match=f"{what} file .*{re.escape(name)}: .* is .*{says}"):
        D.load_file(files["graph"], labels=files["labels"], features=files["features"])


def test_platonov_npz_masks_in_pyg_columns_are_transposed_with_a_warning(tmp_path):
    a = _platonov(tmp_path / "rows.npz")
    np.savez(tmp_path / "cols.npz", **{k: (v.T if k.endswith("_masks") else v) for k, v in a.items()})
    with pytest.warns(UserWarning, match=r"masks of shape \(6, 2\) read as 2 splits of 6 nodes"):
        ds = D.load_file(tmp_path / "cols.npz")
    ref = D.load_file(tmp_path / "rows.npz")
    for part in ("train", "val", "test"):
        np.testing.assert_array_equal(getattr(ds.splits, part), getattr(ref.splits, part))


def test_features_csv_with_an_id_column_is_not_read_as_a_feature(tmp_path):
    """pandas' DataFrame.to_csv writes an unnamed index column (',f0,f1' or ',0,1' headers) and many files name an
    id column ('node_id,...'): read as a feature it was a silent extra column (the node index as a feature).
    Placed by id where the ids are the labels file's, in row order for a pandas index 0..n-1."""
    (tmp_path / "e.csv").write_text("1,2\n2,3\n3,4\n4,1\n")
    (tmp_path / "l.csv").write_text("1,a\n2,b\n3,a\n4,b\n")  # 1-based ids: node index = labels-file row
    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 7
    row = lambda i: ",".join(repr(float(v)) for v in x[i])  # noqa: E731
    files = {"pandas.csv": ",f0,f1,f2\n" + "".join(f"{i},{row(i)}\n" for i in range(4)),   # RangeIndex: row order
             "pandas_num.csv": ",0,1,2\n" + "".join(f"{i},{row(i)}\n" for i in range(4)),
             "by_id.csv": "node_id,a,b,c\n" + "".join(f"{i + 1},{row(i)}\n" for i in (2, 0, 3, 1)),  # shuffled
             "plain.csv": "a,b,c\n" + "".join(f"{row(i)}\n" for i in range(4))}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ds = D.load_file(tmp_path / "e.csv", labels=tmp_path / "l.csv", features=tmp_path / name)
        np.testing.assert_allclose(ds.features, x, rtol=1e-7, err_msg=name)
        said = [str(w.message) for w in caught if "read as node ids" in str(w.message)]
        assert len(said) == (0 if name == "plain.csv" else 1), name
    (tmp_path / "bad.csv").write_text("id,a,b,c\n" + "".join(f"{i + 7},{row(i)}\n" for i in range(4)))
    with pytest.warns(UserWarning, match="read as node ids"):
        with pytest.raises(ValueError, match=r"bad.csv: the first column \(header 'id'\) holds node ids that are "
                                             r"neither the labels file's 4 ids nor 0..3 in row order"):
            D.load_file(tmp_path / "e.csv", labels=tmp_path / "l.csv", features=tmp_path / "bad.csv")


def test_quoted_csv_fields_are_read_without_their_quotes(tmp_path):
    """R's write.csv quotes every string and pandas quotes where needed: "ann" is the id ann (a mix of quoted and
    unquoted files named no common node before), "" an empty (missing) label, quoted numbers are numbers."""
    (tmp_path / "l.csv").write_text('"node","label"\n"ann","cat"\n"bob","dog"\n"cy","cat"\n"dee","dog"\n"eve",""\n')
    (tmp_path / "e.csv").write_text("ann,bob\nbob,cy\ncy,dee\ndee,eve\n")
    (tmp_path / "eq.csv").write_text('"ann","bob"\n"bob","cy"\n"cy","dee"\n"dee","eve"\n')
    with pytest.warns(UserWarning, match="1 of 5"):
        a = D.load_file(tmp_path / "e.csv", labels=tmp_path / "l.csv")
    with pytest.warns(UserWarning, match="1 of 5"):
        b = D.load_file(tmp_path / "eq.csv", labels=tmp_path / "l.csv")
    assert a.info["label_values"] == ["cat", "dog"] and a.node_ids.tolist() == ["ann", "bob", "cy", "dee", "eve"]
    np.testing.assert_array_equal(a.labels, [0, 1, 0, 1, -1])
    np.testing.assert_array_equal(np.asarray(a.graph.senders), np.asarray(b.graph.senders))
    (tmp_path / "ei.csv").write_text('"0","1"\n"1","2"\n')
    (tmp_path / "li.csv").write_text('"0","5"\n"1","7"\n"2","5"\n')
    (tmp_path / "x.csv").write_text('"0.5","1"\n"1.5","2"\n"2.5","3"\n')
    ds = D.load_file(tmp_path / "ei.csv", labels=tmp_path / "li.csv", features=tmp_path / "x.csv")
    assert ds.info["label_values"] == [5, 7] and ds.graph.num_edges == 4
    np.testing.assert_array_equal(ds.features, [[0.5, 1], [1.5, 2], [2.5, 3]])


def test_an_ignored_weight_column_is_said(tmp_path):
    (tmp_path / "l.csv").write_text("".join(f"{i},{'ab'[i % 2]}\n" for i in range(6)))
    (tmp_path / "e.csv").write_text("source,target,weight\n0,1,0.5\n1,2,2.0\n")
    with pytest.warns(UserWarning, match=r"e.csv: the third column \('weight'\) is ignored: .*--weighted"):
        ds = D.load_file(tmp_path / "e.csv", labels=tmp_path / "l.csv")
    assert set(np.asarray(ds.graph.weights).tolist()) == {1.0}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # weighted, or a third column that is no weight: nothing to say
        D.load_file(tmp_path / "e.csv", labels=tmp_path / "l.csv", weighted=True)
        (tmp_path / "t.csv").write_text("source,target,time\n0,1,5\n1,2,6\n")
        D.load_file(tmp_path / "t.csv", labels=tmp_path / "l.csv")


def test_numpy_arrays_as_edges_and_labels(tmp_path):
    """A numpy user's graph: edges.npy as (m, 2) rows or PyG's (2, m) edge_index (a third row/column the weight
    with weighted=True, else ignored with a warning), labels.npy one per node (NaN: unlabelled) — the same
    dataset as the text files; ambiguous shapes and string ids are refused."""
    rng = np.random.default_rng(0)
    n = 30
    pairs = np.argwhere(np.triu(np.ones((n, n), bool), 1))
    e = pairs[rng.choice(len(pairs), 80, replace=False)]  # no loops or repeats: no cleanup warnings
    y = np.arange(n) % 3
    np.savetxt(tmp_path / "e.csv", e, fmt="%d", delimiter=",")
    np.savetxt(tmp_path / "l.csv", y, fmt="%d")
    w = rng.random(80)
    np.savetxt(tmp_path / "ew.csv", np.c_[e, w], fmt=["%d", "%d", "%.17g"], delimiter=",")
    np.save(tmp_path / "e.npy", e)
    np.save(tmp_path / "eT.npy", e.T)
    np.save(tmp_path / "ew.npy", np.c_[e, w])
    np.save(tmp_path / "l.npy", y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ref = D.load_file(tmp_path / "e.csv", labels=tmp_path / "l.csv")
        refw = D.load_file(tmp_path / "ew.csv", labels=tmp_path / "l.csv", weighted=True)
        for g, lab, kw, want in (("e.npy", "l.npy", {}, ref), ("eT.npy", "l.csv", {}, ref),
                                 ("ew.npy", "l.npy", {"weighted": True}, refw)):
            ds = D.load_file(tmp_path / g, labels=tmp_path / lab, **kw)
            for a in ("senders", "receivers", "weights"):
                np.testing.assert_array_equal(np.asarray(getattr(ds.graph, a)), np.asarray(getattr(want.graph, a)))
            np.testing.assert_array_equal(ds.labels, y)
    with pytest.warns(UserWarning, match=r"ew.npy: the third column is ignored"):
        D.load_file(tmp_path / "ew.npy", labels=tmp_path / "l.npy")
    yf = y.astype(np.float64)
    yf[[3, 4]] = np.nan
    np.save(tmp_path / "lf.npy", yf)
    with pytest.warns(UserWarning, match="2 of 30"):
        got = D.load_file(tmp_path / "e.npy", labels=tmp_path / "lf.npy").labels
    assert got[[2, 3, 4, 5]].tolist() == [2, -1, -1, 2]
    np.save(tmp_path / "e22.npy", np.array([[0, 1], [1, 2]]))
    np.save(tmp_path / "ehalf.npy", e + 0.5)
    np.save(tmp_path / "onehot.npy", np.eye(3)[y])
    for g, lab, msg in (("e22.npy", "l.npy", r"got \(2, 2\) \(ambiguous: rows or columns\?\)"),
                        ("ehalf.npy", "l.npy", r"ehalf.npy: node ids must be integers"),
                        ("e.npy", "onehot.npy", r"labels must be a \(n,\) array.*one-hot\? pass y.argmax\(1\)")):
        with pytest.raises(ValueError, match=msg):
            D.load_file(tmp_path / g, labels=tmp_path / lab)
    (tmp_path / "s.csv").write_text("ann,a\nbob,b\ncy,a\n")
    with pytest.raises(ValueError, match="the labels file's ids are not integers"):
        D.load_file(tmp_path / "e.npy", labels=tmp_path / "s.csv")


def test_fields_with_spaces_in_separated_files(tmp_path):
    """A comma-, TAB- or semicolon-separated line splits on that separator alone: labels and string ids may hold
    spaces ('Computer Science', 'John Smith'; before, such a row had 3 fields, an error); a line without one splits
    on whitespace, as SNAP's files need."""
    for sep in (",", "\t", ";"):
        (tmp_path / "l.csv").write_text(f"node{sep}label\nJohn Smith{sep}Computer Science\nJane Doe{sep}Biology\n"
                                        f"Al Ng{sep}Computer Science\n")
        (tmp_path / "e.csv").write_text(f"John Smith{sep}Jane Doe\nJane Doe{sep} Al Ng\n")
        ds = D.load_file(tmp_path / "e.csv", labels=tmp_path / "l.csv")
        assert ds.node_ids.tolist() == ["John Smith", "Jane Doe", "Al Ng"]
        assert ds.info["label_values"] == ["Biology", "Computer Science"] and ds.graph.num_edges == 4
        np.testing.assert_array_equal(ds.labels, [1, 0, 1])
    (tmp_path / "w.txt").write_text("# FromNodeId ToNodeId\n0 1\n1  2\n")
    (tmp_path / "wl.txt").write_text("0 a\n1 b\n2 a\n")
    assert D.load_file(tmp_path / "w.txt", labels=tmp_path / "wl.txt").graph.num_edges == 4


def test_labels_csv_with_named_columns(tmp_path):
    """``read_labels_file(path, id_column, label_column)`` reads a CSV with more columns through its header (an
    empty label field: unlabelled; names matched ignoring case and spaces); without the names the error points
    at the header line (line 1), not the last line; a short row names its own line."""
    f = tmp_path / "t.csv"
    f.write_text("id,days,mature,new_id\n9,1,True,2\n8,2,,0\n7,3,False,1\n")
    ids, raw = read_labels_file(f, id_column="new_id", label_column=" Mature")
    assert ids.tolist() == [2, 0, 1] and raw.tolist() == ["True", "?", "False"]
    ids, raw = read_labels_file(f, label_column="days")  # the id column defaults to the first
    assert ids.tolist() == [9, 8, 7] and raw.tolist() == [1, 2, 3]
    with pytest.raises(ValueError, match=r"t\.csv: line 1 \(the header 'id,days,mature,new_id'\): 4 columns.*"
                                         r"--id-column id .*--label-column one of days, mature, new_id"):
        read_labels_file(f)
    with pytest.raises(ValueError, match=r"line 1 \(the header 'id,days,mature,new_id'\): 4 columns; name the label "
                                         r"column with --label-column"):
        read_labels_file(f, id_column="new_id")
    f.write_text("id,days,mature,new_id\n9,1,True,2\n8,2\n")
    with pytest.raises(ValueError, match=r"t\.csv: line 3: 2 field\(s\), the header \(line 1\) names 4"):
        read_labels_file(f, id_column="new_id", label_column="mature")
    f.write_text("0,1,2\n1,0,1\n")  # no header: the first offending row is named
    with pytest.raises(ValueError, match=r"t\.csv: line 1: expected 'node,label' or one label per line, got 3"):
        read_labels_file(f)


def test_load_file_refusals_name_the_way_out(tmp_path):
    """An empty edge list, a folder as labels and an edge to a node the labels file lacks are refused with the
    file and what to do."""
    (tmp_path / "y.csv").write_text("a,0\nb,1\nc,0\n")
    (tmp_path / "e.csv").write_text("src,dst\n")
    with pytest.raises(ValueError, match=r"e\.csv: no edges \(no 'u,v' line below its header\); write one edge per "
                                         r"line"):
        D.load_file(tmp_path / "e.csv", labels=tmp_path / "y.csv")
    (tmp_path / "e.csv").write_text("a,a\nb,b\n")
    with pytest.raises(ValueError, match=r"e\.csv: every one of its 2 edge line\(s\) is a self-loop"):
        D.load_file(tmp_path / "e.csv", labels=tmp_path / "y.csv")
    (tmp_path / "e.csv").write_text("a,b\nb,zed\n")
    with pytest.raises(ValueError, match=r"not in y\.csv, e\.g\. \['zed'\] \(labels file .*y\.csv\); list every "
                                         r"node of the graph in the labels file, an unlabelled one with an empty "
                                         r"label"):
        D.load_file(tmp_path / "e.csv", labels=tmp_path / "y.csv")
    (tmp_path / "ydir").mkdir()
    with pytest.raises(ValueError, match=r"--labels .*ydir is a folder, not a file: pass the labels file itself$"):
        D.load_file(tmp_path / "e.csv", labels=tmp_path / "ydir")
    with pytest.raises(ValueError, match=r"pass labels= \(--labels\) too"):
        D.load_file(tmp_path / "e.csv", label_column="x")


def test_labels_that_look_like_values_or_swapped_files_are_refused(tmp_path):
    """A column of values read as labels (a class per node) and an edge list passed as the labels file each get
    one line saying what they look like and what to pass instead."""
    n = 120
    (tmp_path / "e.csv").write_text("".join(f"{i},{(i + 1) % n}\n" for i in range(n)))
    (tmp_path / "views.csv").write_text("".join(f"{i},{1000 + 7 * i}\n" for i in range(n)))
    with pytest.raises(ValueError, match=r"views\.csv: 120 distinct labels for 120 labelled nodes, 120 of them on a "
                                         r"single node: .*choose the column of classes"):
        D.load_file(tmp_path / "e.csv", labels=tmp_path / "views.csv")
    (tmp_path / "y.csv").write_text("".join(f"{i},{i % 2}\n" for i in range(n)))
    with pytest.raises(ValueError, match=r"e\.csv: 120 distinct labels"), \
            pytest.warns(UserWarning, match="2 self-loop line"):  # swapped, a ring: one row per id
        D.load_file(tmp_path / "y.csv", labels=tmp_path / "e.csv")
    (tmp_path / "e.csv").write_text("".join(f"{i},{(i + 1) % n}\n{i},{(i + 2) % n}\n" for i in range(n)))
    with pytest.raises(ValueError, match=r"e\.csv: 120 node id\(s\) listed more than once with different labels "
                                         r".*; fix the file; it reads like an edge list \(most node ids repeat\): "
                                         r"--graph takes the edges, --labels the 'node,label' rows$"):
        D.load_file(tmp_path / "y.csv", labels=tmp_path / "e.csv")  # swapped
