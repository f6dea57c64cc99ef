"""``load_file``: any user's graph, from a file the registry does not know.

Five inputs are recognized:

(a) ``.npz`` in the Platonov et al. layout (yandex-research/heterophilous-graphs): ``node_features`` (n, d),
    ``node_labels`` (n,), ``edges`` (m, 2), optional ``train_masks``/``val_masks``/``test_masks``
    (num_splits, n) -> the dataset's published splits (``--split published``);
(b) ``.npz`` in the Shchur et al. CSR layout (shchur/gnn-benchmark): ``adj_data``/``adj_indices``/
    ``adj_indptr``/``adj_shape``, ``attr_*`` (optional), ``labels``;
(c) a folder in the OGB node-property layout (``raw/edge.csv.gz``, ``raw/node-label.csv.gz``, optional
    ``raw/node-feat.csv.gz``, ``split/<name>/{train,valid,test}.csv.gz``; see :mod:`jaxclp.datasets.ogb`);
(d) an ``.npy`` array of edges ((m, 2) rows, or PyG's (2, m) ``edge_index``; a third column/row the weight with
    ``weighted``) with ``labels=`` a text labels file or an ``.npy`` of one label per node (NaN or -1: unlabelled);
(e) any other file is an edge list: one edge ``u v`` per line (separated by commas, tabs, spaces or
    semicolons; an optional header line; a third column is the edge weight with ``weighted=True``, else ignored,
    like any further column), with ``labels=`` a labels
    file (``node,label`` rows, or one label per line for nodes 0..n-1; optional header; labels may be integers
    or strings) and optionally ``features=`` (``.npy`` dense (n, d); ``.npz`` CSR as written by
    ``scipy.sparse.save_npz`` or with ``attr_*``/``data,indices,indptr,shape`` keys; or a CSV/text matrix with one
    row per node in node-index order).

Text files may be gzip, bz2 or xz compressed (recognized by their content, e.g. ``edges.csv.gz``), and may begin
with a UTF-8 byte-order mark or be UTF-16 text (as spreadsheet programs export CSV); ``.npy``/``.npz`` features may
be compressed too (``x.npy.gz``).

Unlabelled nodes: a label ``-1`` (scikit-learn's convention) or ``?`` marks a node without a label (a warning
says how many): it stays in the graph, propagation runs through it, it is in no split and never scored
(``Dataset.labels`` -1). Edges may only name nodes of the labels file, so list every node, labelled or not.

Node index: the labels file defines the nodes. If its ids are exactly 0..n-1, index = id; otherwise index = row of
the labels file. Ids are integers, or any other tokens (e.g. ``user_17``, a DOI) when none of the labels file's ids
is an integer; ids mixing both are refused. Edges are mapped through this explicit map (never by order of
appearance). npz files are read with ``numpy.load(allow_pickle=False)``: nothing is ever unpickled.
"""

from __future__ import annotations

import dataclasses
import io
import os
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from jaxclp.datasets._base import Dataset, RawData, build_dataset, encode_labels, integral, report_unlabelled
from jaxclp.datasets._text import (COMPRESSIONS, IdIndex, compression, decompress, first_of_duplicates, read_bytes,
                                  read_text_bytes)
from jaxclp.datasets.heterophilous import REQUIRED_KEYS as HETEROPHILOUS_KEYS
from jaxclp.datasets.heterophilous import read_heterophilous_npz
from jaxclp.datasets.musae import read_multihot_json
from jaxclp.datasets.ogb import ogb_root, read_ogb_folder
from jaxclp.datasets.shchur import ADJ_KEYS as SHCHUR_ADJ_KEYS
from jaxclp.datasets.shchur import read_shchur_npz

__all__ = ["load_file", "read_edge_list", "read_edge_weights", "read_weighted_edge_list", "read_labels_file",
           "read_features_file", "graph_name", "UNLABELLED", "MISSING_TOKENS"]

UNLABELLED = (-1, "-1", "?")
"""Label values of a labels file that mark an unlabelled node (besides an empty field and :data:`MISSING_TOKENS`)."""

MISSING_TOKENS = ("NA", "N/A", "n/a", "#N/A", "<NA>", "NaN", "nan", "-nan", "-NaN", "NULL", "null", "None")
"""What pandas reads (and writes) as a missing value: in a labels file they mark an unlabelled node, like ``?``
(before, ``NA`` or ``nan`` silently became a class of its own)."""

_NOT_A_LABEL = ("unknown", "unlabeled", "unlabelled", "missing", "none", "unk", "n.a.")

_SEPS = b",\t;"
_TO_SPACE_CR = bytes.maketrans(_SEPS + b"\r", b" " * (len(_SEPS) + 1))


def _rows(path, data: bytes | None = None) -> list[tuple[int, list[bytes]]]:
    """Non-blank lines of a text file as ``(1-based line number, tokens)``; a line whose first field starts with
    ``#`` is a comment (SNAP's edge lists begin with some) and skipped. A line holding a comma (else a TAB, else a
    semicolon) is split on it alone, so a field may hold spaces (``0,Computer Science``); other lines split on
    whitespace. A field in double quotes is read without them (a quoted field holding a separator is not supported:
    its row then has too many fields, an error). ``data``: the file's content where the caller has read it already
    (:func:`read_text_bytes`)."""
    data = read_text_bytes(path) if data is None else data
    out = []
    for i, ln in enumerate(data.split(b"\n"), start=1):
        toks = [t for t in _fields(ln) if t]
        if toks and not toks[0].startswith(b"#"):
            out.append((i, toks))
    return out


def _fields(line: bytes) -> list[bytes]:
    """One line's fields, empty ones kept: split on its comma (else TAB, else semicolon) alone, so a field may hold
    spaces ("0,Computer Science"), each stripped and read without enclosing double quotes (R's write.csv quotes
    every string: "ann" is ann, "" an empty field); a line with none of them splits on whitespace."""
    line = line.rstrip(b"\r")
    sep = next((c for c in (b",", b"\t", b";") if c in line), None)
    fields = [f.strip() for f in line.split(sep)] if sep is not None else line.split()
    return [f[1:-1] if len(f) >= 2 and f[:1] == f[-1:] == b'"' else f for f in fields]


def _fast_columns(path, cols: tuple | None, dtype, header_cols: int, data: bytes | None = None):
    """Columns ``cols`` (None: all) of a numeric text file read by numpy's C parser (``np.loadtxt``, ~15x faster than
    :func:`_rows` on a million edges) under :func:`_rows`' rules (separators, blank and ``#`` comment lines) and
    :func:`_drop_header`'s (a first data line whose first ``header_cols`` fields are not all numbers is a header).

    Returns:
        (rows, len(cols) or every column) array, or None when anything is irregular (a short row, a token that
        does not parse, no data): the caller then reads the file line by line and names the line at fault.
    """
    data = (read_text_bytes(path) if data is None else data).translate(_TO_SPACE_CR)
    start = 0
    while start < len(data):  # the first data line: blank and comment lines before it are skipped here
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        toks = data[start:end].split()
        if toks and not toks[0].startswith(b"#"):
            if not all(_is_number(t) for t in toks[:header_cols]):
                start = end + 1  # a header
            break
        start = end + 1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # numpy warns on an empty input: no data is "irregular" here
            return np.loadtxt(io.BytesIO(data[start:]), dtype=dtype, usecols=cols, ndmin=2, comments="#")
    except Exception:  # noqa: BLE001 - any parse problem: the line-by-line reader reports it
        return None


def _is_number(tok: bytes) -> bool:
    try:
        float(tok)
        return True
    except ValueError:
        return False


def _drop_header(rows, path, need_numeric_cols) -> list:
    """Drops a first line whose needed columns are not all numeric (a header)."""
    if rows and not all(_is_number(t) for t in rows[0][1][:need_numeric_cols]):
        return rows[1:]
    return rows


def _int_column(rows, col: int, path, what: str) -> np.ndarray:
    out = np.empty(len(rows), np.int64)
    for j, (line, toks) in enumerate(rows):
        try:
            out[j] = int(toks[col])
        except (ValueError, IndexError):
            got = toks[col].decode(errors="replace") if col < len(toks) else "<missing>"
            raise ValueError(f"{path}: line {line}: {what} must be an integer; got {got!r}") from None
    return out


def read_edge_weights(path, node_ids=None) -> np.ndarray:
    """The third column of an edge list (``u v w`` per line; the rows :func:`read_edge_list` reads) as (m,) float64
    weights.

    Raises:
        ValueError: a row without a third field, a weight that is not a finite nonnegative number (file, line).
    """
    return read_weighted_edge_list(path, node_ids)[1]


_WEIGHTED_ROW = np.dtype([("u", np.int64), ("v", np.int64), ("w", np.float64)])


def read_weighted_edge_list(path, node_ids=None) -> tuple[np.ndarray, np.ndarray]:
    """An edge list with a weight column, parsed once: what :func:`read_edge_list` and :func:`read_edge_weights`
    return, i.e. ``((2, m) node ids as listed, (m,) float64 weights)``, same rules and errors (a large file is read
    by numpy's C parser in one pass; anything irregular goes to the line-by-line reader, which names the line).

    Raises:
        ValueError: as :func:`read_edge_list` and :func:`read_edge_weights`.
    """
    return _read_edges(path, node_ids, weighted=True)


def _read_edges(path, node_ids, weighted: bool, data: bytes | None = None):
    """``((2, m) ids, (m,) weights or None)``: what :func:`read_edge_list` (``weighted=False``) and
    :func:`read_weighted_edge_list` return, the text read once (``data``: already read by the caller) for numpy's C
    parser and, where anything is irregular, the line-by-line reader that names the line."""
    if _format_suffix(path) in _ARRAY_FORMATS:
        return _npy_edges(path, node_ids, weighted=weighted)
    data = read_text_bytes(path) if data is None else data
    if node_ids is None and not weighted:
        fast = _fast_columns(path, (0, 1), np.int64, 2, data)
        if fast is not None:
            return np.ascontiguousarray(fast.T), None
    elif node_ids is None:
        fast = _fast_columns(path, (0, 1, 2), _WEIGHTED_ROW, 2, data)
        if fast is not None:
            fast = fast.ravel()
            w = np.ascontiguousarray(fast["w"])
            if np.all(np.isfinite(w)) and (w.size == 0 or w.min() >= 0):
                return np.stack([fast["u"], fast["v"]]), w
    rows = _edge_rows(path, node_ids, data)
    return _ids_from_rows(rows, path, node_ids), _weights_from_rows(rows, path) if weighted else None


def _weights_from_rows(rows, path) -> np.ndarray:
    w = np.empty(len(rows), np.float64)
    for j, (line, toks) in enumerate(rows):
        try:
            w[j] = float(toks[2])
        except (ValueError, IndexError):
            got = toks[2].decode(errors="replace") if len(toks) > 2 else "<missing>"
            raise ValueError(f"{path}: line {line}: edge weight (third column) must be a number; got {got!r}") \
                from None
        if not (np.isfinite(w[j]) and w[j] >= 0):
            raise ValueError(f"{path}: line {line}: edge weight must be finite and nonnegative; got {w[j]}")
    return w


def _edge_rows(path, node_ids, data: bytes | None = None) -> list:
    """The data rows of an edge list (header dropped, see :func:`read_edge_list`), each with >= 2 fields."""
    rows = _rows(path, data)
    if node_ids is not None:
        known = set(np.asarray(node_ids).tolist())
        if rows and len(rows[0][1]) >= 2 and not {t.decode(errors="replace") for t in rows[0][1][:2]} & known:
            rows = rows[1:]  # a header: neither of its two ids is a node
    else:
        rows = _drop_header(rows, path, 2)
    for line, toks in rows:
        if len(toks) < 2:
            raise ValueError(f"{path}: line {line}: expected 2 node ids (u v), got {len(toks)} field(s)")
    return rows


def read_edge_list(path, node_ids=None) -> np.ndarray:
    """Reads an edge list: ``u v`` per line (``,``/TAB/space/``;``), optional header, extra columns ignored
    (a weight column: :func:`read_edge_weights`).

    Args:
        path: the file.
        node_ids: None (integer ids; a first line whose ids are not numeric is a header), or the (n,) string ids
            of the labels file when they are not integers (:func:`read_labels_file`): the ids are then read as
            strings, and the first line is a header when neither of its two ids is one of ``node_ids``.

    Returns:
        (2, m) node ids as listed: int64, or str with ``node_ids``.

    Raises:
        ValueError: a row with fewer than 2 fields or non-integer ids (message: file and line number).
    """
    return _read_edges(path, node_ids, weighted=False)[0]


def _ids_from_rows(rows, path, node_ids) -> np.ndarray:
    """(2, m) node ids of :func:`_edge_rows`' rows: str with ``node_ids``, else int64 (errors name the line)."""
    if node_ids is not None:
        return np.array([[t[0].decode(errors="replace") for _, t in rows],
                         [t[1].decode(errors="replace") for _, t in rows]]).reshape(2, len(rows))
    return np.stack([_int_column(rows, 0, path, "node id"), _int_column(rows, 1, path, "node id")]) if rows \
        else np.zeros((2, 0), np.int64)


def _is_int(tok: bytes) -> bool:
    try:
        int(tok)
        return True
    except ValueError:
        return False


def _named_columns(path, rows, id_column: str | None, label_column: str | None) -> list:
    """The ``(line, [id, label])`` rows of a multi-column labels CSV whose header names ``id_column`` and
    ``label_column`` (exact names, else the only case-insensitive match); ``id_column`` None: the first column;
    ``label_column`` None: the other column of a two-column file.

    Raises:
        ValueError: a name not in the header, a missing label column on more than two columns, or a row whose
            field count differs from the header's (naming the file, the line and the header).
    """
    if not rows:
        raise ValueError(f"{path}: empty labels file")
    hline, header = rows[0][0], [t.decode(errors="replace") for t in rows[0][1]]
    shown = ",".join(header)

    def find(name, option):
        if name in header:
            return header.index(name)
        folded = [i for i, h in enumerate(header) if h.strip().lower() == name.strip().lower()]
        if len(folded) == 1:
            return folded[0]
        raise ValueError(f"{path}: line {hline} (the header '{shown}'): no column named {name!r} for {option}; "
                         f"the columns are {', '.join(header)}")

    id_col = 0 if id_column is None else find(id_column, "--id-column (id_column=)")
    if label_column is None:
        others = [i for i in range(len(header)) if i != id_col]
        if len(others) != 1:
            raise ValueError(f"{path}: line {hline} (the header '{shown}'): {len(header)} columns; name the label "
                             f"column with --label-column (label_column=), one of {', '.join(header[i] for i in others)}")
        label_col = others[0]
    else:
        label_col = find(label_column, "--label-column (label_column=)")
    if id_col == label_col:
        raise ValueError(f"{path}: the id column and the label column are both {header[id_col]!r}")
    out = []
    for line, toks in rows[1:]:
        if len(toks) != len(header):
            raise ValueError(f"{path}: line {line}: {len(toks)} field(s), the header (line {hline}) names "
                             f"{len(header)}")
        out.append((line, [toks[id_col], toks[label_col]]))
    if not out:
        raise ValueError(f"{path}: no rows below the header (line {hline})")
    return out


def _header_error(path, rows, ncols: int) -> ValueError:
    """The error of a labels file with ``ncols`` (not 1 or 2) fields per row: pointing at its header when its first
    line is one (non-numeric fields) and naming --id-column/--label-column; else at the first such row."""
    first_line, first = rows[0]
    if len(first) == ncols and not all(_is_number(t) for t in first):
        names = [t.decode(errors="replace") for t in first]
        guess = next((n for n in names if n.lower() in ("id", "node", "node_id", "new_id")), names[0])
        return ValueError(f"{path}: line {first_line} (the header '{','.join(names)}'): {ncols} columns, but a labels "
                          f"file is 'node,label' rows; name the columns to read with --id-column and --label-column "
                          f"(load_file(..., id_column=, label_column=)): --id-column {guess} (or the column holding "
                          f"the ids the edge list uses) and --label-column one of "
                          f"{', '.join(n for n in names if n != guess)}")
    line = next(ln for ln, t in rows if len(t) == ncols)
    return ValueError(f"{path}: line {line}: expected 'node,label' or one label per line, got {ncols} fields (a CSV "
                      "with a header can name its columns with --id-column and --label-column)")


def read_labels_file(path, id_column: str | None = None, label_column: str | None = None) -> tuple[np.ndarray,
                                                                                                   np.ndarray]:
    """Reads a labels file: ``node,label`` rows, or one label per line (node ids 0..n-1); optional header. A label
    of -1 or ``?``, or an empty label field (``node,``), marks an unlabelled node.

    A CSV with more columns (e.g. MUSAE's ``id,days,mature,views,partner,new_id``) is read through its header:
    ``id_column`` names the node id column (None: the first) and ``label_column`` the label column (None: the
    other column of a two-column file); a name matches exactly, else ignoring case and surrounding spaces.

    Repeated node ids with the same label are accepted with a warning (first row kept); with different labels
    they are refused.

    Node ids are integers, or strings when no id (below the first line) is an integer; then the first line is
    a header when its label occurs nowhere else in the label column (a header's "label" is not a class; a
    labelled node misread as one is missing from the node set, and its edges then raise).

    Returns:
        ``(node_ids, raw_labels)``: (n,) int64 (or str) ids and (n,) label values (int64 if all integers, else
        str), in file row order.

    Raises:
        ValueError: mixed 1- and 2-column rows, node ids mixing integers and other tokens (file and line
            number), conflicting duplicates, an empty file; more than two columns without ``label_column`` (the
            message points at the header); a column name the header does not have.
    """
    named = id_column is not None or label_column is not None
    if named and _format_suffix(path) in _ARRAY_FORMATS:
        raise ValueError(f"{path}: id_column/label_column (--id-column/--label-column) name columns of a CSV "
                         "labels file; an array holds one label per node")
    if _format_suffix(path) in _ARRAY_FORMATS:  # one label per node, in node order (NaN: unlabelled)
        arr = _load_array(path, "labels")
        if arr.ndim == 2 and arr.shape[1] == 1:
            arr = arr[:, 0]
        if arr.ndim != 1 or arr.size == 0:
            raise ValueError(f"{path}: labels must be a (n,) array, one label per node; got shape {arr.shape}"
                             + (" (one-hot? pass y.argmax(1))" if arr.ndim == 2 else ""))
        return np.arange(arr.size, dtype=np.int64), _integers(arr, path, "labels", missing_ok=True)
    data = read_text_bytes(path)
    rows = _rows(path, data)
    if not rows:
        raise ValueError(f"{path}: empty labels file")
    if named:
        # fields kept empty: "7,,False" holds an empty field; _rows drops empty tokens, so split the lines again
        lines = data.split(b"\n")
        rows = [(i, [t for t in _fields(lines[i - 1])]) for i, _ in rows]
        rows = _named_columns(path, rows, id_column, label_column)
        rows = [(i, [t[0], t[1] if t[1] else b"?"]) for i, t in rows]
    elif any(len(t) == 2 for _, t in rows) and any(len(t) == 1 for _, t in rows):
        # "node," (an empty label field, as pandas writes a missing value): an unlabelled node, like "node,?"
        text = data.split(b"\n")
        rows = [(i, t + [b"?"]) if len(t) == 1 and text[i - 1].rstrip(b"\r ").removesuffix(b'""').endswith(
                    (b",", b";", b"\t")) else (i, t) for i, t in rows]
    ncols = len(rows[-1][1])
    if ncols not in (1, 2):
        raise _header_error(path, rows, ncols)
    string_ids = ncols == 2 and len(rows) > 1 and not any(_is_int(t[0]) for _, t in rows[1:])
    if named:
        string_ids = not any(_is_int(t[0]) for _, t in rows)
    elif string_ids:
        if all(len(t) == 2 and t[1] != rows[0][1][1] for _, t in rows[1:]):
            rows = rows[1:]  # a header: its "label" is no other row's label
    elif ncols == 2:
        rows = _drop_header(rows, path, 1)
    elif rows and not _is_number(rows[0][1][0]) and all(_is_number(t[0]) for _, t in rows[1:2]):
        rows = rows[1:]  # header above numeric labels
    for line, toks in rows:
        if len(toks) != ncols:
            raise ValueError(f"{path}: line {line}: expected {ncols} field(s) like the other rows, got {len(toks)}")
    if ncols == 1:
        ids = np.arange(len(rows), dtype=np.int64)
        lab_tok = [t[0] for _, t in rows]
    else:
        ids = (np.array([t[0].decode(errors="replace") for _, t in rows]) if string_ids
               else _int_column(rows, 0, path, "node id"))
        lab_tok = [t[1] for _, t in rows]
    missing = {t.encode() for t in MISSING_TOKENS} | {b"?"}
    lab_tok = [b"?" if t in missing else t for t in lab_tok]
    try:
        raw = np.array([int(t) for t in lab_tok], dtype=np.int64)
    except ValueError:
        if all(t == b"?" or _is_int(t) for t in lab_tok):  # integer labels with missing ones: stay integers
            raw = np.array([-1 if t == b"?" else int(t) for t in lab_tok], dtype=np.int64)
        else:
            raw = np.array([t.decode(errors="replace") for t in lab_tok])
    keep = first_of_duplicates(ids, raw, str(path))
    return ids[keep], raw[keep]


def _encode_with_unlabelled(raw: np.ndarray, path) -> tuple[np.ndarray, np.ndarray]:
    """:func:`encode_labels` of the labelled nodes; code -1 for the :data:`UNLABELLED` values (with a warning).

    Raises:
        ValueError: every node is unlabelled.
    """
    numeric = raw.dtype.kind in "iu"
    unl = np.isin(raw, [u for u in UNLABELLED if isinstance(u, int) == numeric])
    if not numeric:
        named = sorted({v for v in raw[~unl].tolist() if v.strip().lower() in _NOT_A_LABEL})
        for v in named:
            warnings.warn(f"{path}: label {v!r} is read as a class ({int(np.sum(raw == v))} nodes); if it marks nodes "
                          "without a label, write -1, '?' or nothing after the comma instead", UserWarning,
                          stacklevel=4)
    if not unl.any():
        return encode_labels(raw)
    report_unlabelled(unl, str(path), "-1, '?', an empty label or a missing-value token (NA, nan, null, None)",
                      ". If -1 is a class of yours (e.g. -1/+1 labels), recode it")
    codes = np.full(raw.shape, -1, dtype=np.int32)
    codes[~unl], classes = encode_labels(raw[~unl])
    return codes, classes


def read_features_file(path, num_nodes: int, index: IdIndex | None = None):
    """Reads a features file for ``num_nodes`` nodes (rows in node-index order).

    ``.npy``: dense (n, d) numeric array. ``.npz``: a sparse matrix saved by ``scipy.sparse.save_npz``, or
    CSR parts ``attr_data/attr_indices/attr_indptr/attr_shape`` or ``data/indices/indptr/shape``, or a single
    dense array. ``.json``: ``{"<node id>": [feature ids, ...]}`` (the MUSAE layout: binary features keyed by the
    node ids of ``index``, so no row order is assumed; a node absent from the file gets a zero row; one column
    per feature id that occurs). Anything else: a numeric text matrix (``,``/TAB/space separated, optional
    header line), rows in node-index order — or, when the labels file's ids are not integers (``n17``), rows
    keyed by a first column of node ids, in any order (every node exactly once). A header whose first field names
    an id column (``id``, ``node``, ``node_id``, ``index``, ...; or is empty, the index column pandas'
    ``DataFrame.to_csv`` writes) makes that column node ids, not a feature (with a warning): rows placed by id, or
    in row order for a pandas index 0..n-1.

    Args:
        path: the file.
        num_nodes: n.
        index: the node ids (:class:`IdIndex` of the labels file) a ``.json`` file's keys are mapped through
            (default: ids 0..n-1).

    Returns:
        (n, d) float32 array or CSR matrix.

    Raises:
        ValueError: wrong number of rows, non-numeric values (file and line number), arrays that need pickle.
    """
    fmt = _format_suffix(path)
    if fmt == ".npy":
        try:
            x = np.load(_binary_source(path), allow_pickle=False)
        except ValueError as err:
            raise ValueError(f"{path}: not a numeric .npy array ({err})") from None
        if x.ndim == 1:
            x = x[:, None]
        if x.ndim != 2 or not np.issubdtype(x.dtype, np.number):
            raise ValueError(f"{path}: features must be a numeric (n, d) array; got {x.dtype} {x.shape}")
        x = x.astype(np.float32)
    elif fmt == ".npz":
        try:
            with np.load(_binary_source(path), allow_pickle=False) as z:
                keys = set(z.files)
                if {"data", "indices", "indptr", "shape"} <= keys:
                    x = sp.load_npz(_binary_source(path)) if "format" in keys else sp.csr_matrix(
                        (z["data"], z["indices"], z["indptr"]), shape=tuple(int(s) for s in z["shape"]))
                elif {"attr_data", "attr_indices", "attr_indptr", "attr_shape"} <= keys:
                    x = sp.csr_matrix((z["attr_data"], z["attr_indices"], z["attr_indptr"]),
                                      shape=tuple(int(s) for s in z["attr_shape"]))
                elif len(keys) == 1:
                    x = np.asarray(z[next(iter(keys))], dtype=np.float32)
                else:
                    raise ValueError(f"{path}: expected a sparse matrix (data/indices/indptr/shape, as written by "
                                     f"scipy.sparse.save_npz, or attr_*) or a single array; has keys "
                                     f"{sorted(keys)}")
        except ValueError as err:
            if "allow_pickle" in str(err):
                raise ValueError(f"{path}: an array needs pickle to load; refusing to unpickle it") from None
            raise
        x = sp.csr_matrix(x, dtype=np.float32) if sp.issparse(x) else x
    elif fmt == ".json":
        x, _ = read_multihot_json(path, index if index is not None else IdIndex(np.arange(num_nodes), "0..n-1"))
    elif (id_name := _id_header(data := read_text_bytes(path))) is not None:
        x = _features_with_id_column(path, data, num_nodes, index, id_name)
    elif (fast := _fast_columns(path, None, np.float32, 1, data)) is not None and fast.shape[0] > 0:
        x = fast  # numpy's C reader; irregular files go line by line below, which names the line
    else:
        rows = _rows(path, data)
        if rows and len(rows[0][1]) > 1 and not any(_is_number(t) for t in rows[0][1][1:]):
            rows = rows[1:]  # a header line: no number after its first field
        keyed = bool(rows) and not _is_number(rows[0][1][0]) and all(_is_number(t) for t in rows[0][1][1:])
        if not keyed:
            rows = _drop_header(rows, path, 1)
        if not rows:
            raise ValueError(f"{path}: empty features file")
        x = _features_by_id(path, rows, num_nodes, index) if keyed else _numeric_rows(path, rows)
    if x.shape[0] != num_nodes:
        order = ("in the labels file's row order" if index is not None and not index.is_identity
                 else f"row i for node id i, 0..{num_nodes - 1}")
        raise ValueError(f"{path}: {x.shape[0]} feature rows but the labels file defines {num_nodes} nodes; give one "
                         f"row per node of the graph ({num_nodes} rows, {order}; list every node in the labels file, "
                         "an unlabelled one with an empty label)")
    _check_finite_features(path, x, index)
    return x


_TO_EDGE_LIST = ("write the edges as text, one 'u,v' per line (networkx: nx.write_edgelist(G, 'edges.csv', "
                 "delimiter=',', data=False)), with a labels file 'node,label'; or build a jaxclp.Graph in Python "
                 "(Graph.from_networkx, from_scipy, from_edge_index)")
_OTHER_FORMATS = {
    (".graphml", ".gml", ".gexf", ".net", ".pajek", ".gpickle"): "a networkx/Gephi graph format: " + _TO_EDGE_LIST,
    (".pt", ".pth", ".pkl", ".pickle", ".joblib", ".bin", ".dgl"):
        "a pickled (torch/DGL/Python) object, which jaxclp never unpickles: save its arrays with numpy "
        "(np.savez('g.npz', node_features=x, node_labels=y, edges=edge_index.T) is the Platonov layout jaxclp reads) "
        "or as text",
    (".mat",): "a MATLAB file: " + _TO_EDGE_LIST + "; scipy.io.loadmat reads it",
    (".h5", ".hdf5", ".parquet", ".feather", ".arrow", ".xlsx", ".xls", ".ods"):
        "a binary table: export it as CSV (pandas: df.to_csv('edges.csv', index=False))",
}


def check_format(path, what: str) -> None:
    """ValueError with the way out where ``path`` (the ``what`` file) has a known format jaxclp does not read
    (GraphML, pickles, MATLAB, HDF5/Parquet/Excel): read as text it would fail on its first line, or worse."""
    fmt = _format_suffix(path)
    for suffixes, hint in _OTHER_FORMATS.items():
        if fmt in suffixes:
            raise ValueError(f"{what} file {path}: {fmt} is {hint}")


_ARRAY_FORMATS = (".npy", ".npz")


def _load_array(path, what: str) -> np.ndarray:
    """The numeric array of a ``.npy`` (or a ``.npz`` holding one array) ``what`` file, never unpickled.

    Raises:
        ValueError: an object array (it needs pickle), a ``.npz`` with several arrays, a non-numeric array.
    """
    try:
        if _format_suffix(path) == ".npz":
            with np.load(_binary_source(path), allow_pickle=False) as z:
                if len(z.files) != 1:
                    raise ValueError(f"{path}: a {what} .npz must hold one array; has {sorted(z.files)}")
                arr = np.asarray(z[z.files[0]])
        else:
            arr = np.asarray(np.load(_binary_source(path), allow_pickle=False))
    except ValueError as err:
        if "allow_pickle" in str(err):
            raise ValueError(f"{path}: an array needs pickle to load; refusing to unpickle it") from None
        raise
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise ValueError(f"{path}: {what} must be a numeric array; got {arr.dtype} {arr.shape}")
    return arr


def _integers(arr: np.ndarray, path, what: str, missing_ok: bool = False) -> np.ndarray:
    """``arr`` as int64: integral floats are accepted; with ``missing_ok`` NaN becomes -1 (unlabelled)."""
    ints, nan, bad = integral(arr)
    if not missing_ok:
        bad = bad | nan
    if bad.any():
        at = np.argwhere(bad)[:5].tolist()
        raise ValueError(f"{path}: {what} must be integers{' (NaN: unlabelled)' if missing_ok else ''}; "
                         f"{int(bad.sum())} entries are not, e.g. at {at}")
    return ints


def _npy_edges(path, node_ids, weighted: bool):
    """``((2, m) int64 ids, (m,) float64 weights or None)`` of a ``.npy``/``.npz`` edge array: (m, 2) rows as
    ``np.savetxt`` would write them, or PyG's (2, m) ``edge_index``; a third column/row is the weight with
    ``weighted`` (else ignored, with a warning).

    Raises:
        ValueError: string node ids in the labels file, a shape that is neither or both (a (2, 2) array),
            non-integer ids, bad weights.
    """
    if node_ids is not None:
        raise ValueError(f"{path}: an array of edges holds integer node ids, but the labels file's ids are not "
                         "integers; write the edges as text with the same ids")
    arr = _load_array(path, "edge")
    rows = arr.ndim == 2 and arr.shape[1] in (2, 3) and arr.shape[0] not in (2, 3)
    columns = arr.ndim == 2 and arr.shape[0] in (2, 3) and arr.shape[1] not in (2, 3)
    if not (rows or columns) or (weighted and 3 not in arr.shape):
        what = "(m, 3) or (3, m): u, v, weight" if weighted else "(m, 2) or PyG's (2, m) edge_index"
        amb = " (ambiguous: rows or columns?)" if arr.ndim == 2 and arr.shape[0] in (2, 3) and \
            arr.shape[1] in (2, 3) else ""
        raise ValueError(f"{path}: edges must be an array of shape {what}; got {arr.shape}{amb}")
    cols = arr if rows else arr.T
    ids = np.ascontiguousarray(_integers(cols[:, :2], path, "node ids").T)
    if not weighted:
        if cols.shape[1] == 3:
            warnings.warn(f"{path}: the third column is ignored: the graph is unweighted unless you pass --weighted "
                          "(load_file(..., weighted=True))", UserWarning, stacklevel=5)
        return ids, None
    w = cols[:, 2].astype(np.float64)
    if not np.all(np.isfinite(w)) or (w < 0).any():
        raise ValueError(f"{path}: edge weights must be finite and nonnegative; "
                         f"{int(np.sum(~np.isfinite(w) | (w < 0)))} are not")
    return ids, w


def _format_suffix(path) -> str:
    """A file's format suffix, lower case, under a compression suffix: ``x.NPY`` -> ``.npy``, ``x.npy.gz`` ->
    ``.npy``, ``node-feat.csv.gz`` -> ``.csv``."""
    name = os.path.basename(str(path)).lower()
    for ext in (".gz", ".bz2", ".xz"):
        if name.endswith(ext):
            name = name[:-len(ext)]
            break
    return os.path.splitext(name)[1]


def _binary_source(path):
    """``path`` for ``numpy.load``, or its decompressed bytes as a file object where the file is gzip, bz2 or xz
    compressed (a ``.npy.gz``)."""
    with open(path, "rb") as f:
        head = f.read(16)
    if compression(head) in COMPRESSIONS:
        return io.BytesIO(decompress(read_bytes(path), str(path)))
    return path


def _check_finite_features(path, x, index: IdIndex | None) -> None:
    """ValueError naming the nodes (their ids) whose feature rows hold NaN or inf (dense or CSR ``x``)."""
    bad = ~np.isfinite(x.data if sp.issparse(x) else x)
    if not bad.any():
        return
    if sp.issparse(x):
        rows = np.unique(np.repeat(np.arange(x.shape[0]), np.diff(x.indptr))[bad])
    else:
        rows = np.flatnonzero(bad.any(axis=1))
    ids = (index.ids[rows[:5]] if index is not None else rows[:5]).tolist()
    raise ValueError(f"{path}: features contain NaN or inf: {int(bad.sum())} value(s) in {rows.size} node(s)' rows, "
                     f"e.g. node(s) {ids}; fill or drop those values (no method here imputes them)")


def _numeric_rows(path, rows, id_column: bool = False) -> np.ndarray:
    """(len(rows), d) float32 of text rows of d numbers each (after a node id with ``id_column``); a ragged or
    non-numeric row is an error naming the file and line."""
    skip = int(id_column)
    d = len(rows[0][1]) - skip
    want = f"a node id and {d} numbers" if id_column else f"{d} numbers"
    x = np.empty((len(rows), d), np.float32)
    for j, (line, toks) in enumerate(rows):
        if len(toks) != d + skip:
            raise ValueError(f"{path}: line {line}: expected {want} like the first row, got {len(toks)}")
        try:
            x[j] = [float(t) for t in toks[skip:]]
        except ValueError:
            raise ValueError(f"{path}: line {line}: non-numeric value in features row") from None
    return x


_ID_COLUMN_NAMES = ("", "id", "node", "node_id", "nodeid", "node id", "index", "idx", "unnamed: 0", "vertex", "name")
"""First header fields that name a node-id column of a features CSV (``""``: the unnamed index column pandas'
``DataFrame.to_csv`` writes by default)."""


def _id_header(data: bytes) -> str | None:
    """The first field of a features file's header line (lower case) where it names a node-id column (see
    :data:`_ID_COLUMN_NAMES`: read as a feature, such a column was a silent extra feature); else None (no header,
    or a header whose first field names a feature). ``data``: the file's text (:func:`read_text_bytes`)."""
    for line in data.split(b"\n"):
        if not line.strip() or line.lstrip().startswith(b"#"):
            continue
        fields = _fields(line)
        if len(fields) >= 2 and fields[0] == b"" and [f.decode(errors="replace") for f in fields[1:]] == \
                [str(i) for i in range(len(fields) - 1)]:
            return ""  # pd.DataFrame(x).to_csv(): the unnamed index column, then the column numbers 0..d-1
        if len(fields) < 2 or all(_is_number(f) for f in fields[1:] if f):
            return None  # a data line, or a header of numbers: no id column named
        first = fields[0].decode(errors="replace").lower()
        return first if first in _ID_COLUMN_NAMES else None
    return None


def _features_with_id_column(path, data: bytes, num_nodes: int, index, id_name: str) -> np.ndarray:
    """A features CSV whose header names its first column as the node id (``id,x1,...``, or pandas' unnamed index
    ``,x1,...``): the column is read as ids, not as a feature (with a warning). Rows are placed by id where the ids
    are the labels file's; a pandas index 0..n-1 in row order is the row order itself.

    Raises:
        ValueError: ids that are neither (file and example ids named), as :func:`_features_by_id` otherwise.
    """
    rows = _rows(path, data)[1:]
    if not rows:
        raise ValueError(f"{path}: empty features file")
    if index is not None and not np.issubdtype(index.ids.dtype, np.integer):
        return _features_by_id(path, rows, num_nodes, index)  # string ids: an id column is the only layout
    warnings.warn(f"{path}: the first column (header {id_name!r}) is read as node ids, not as a feature",
                  UserWarning, stacklevel=4)
    ids = _int_column(rows, 0, path, "node id (first column)")
    x = _numeric_rows(path, rows, id_column=True)
    known = index if index is not None else IdIndex(np.arange(num_nodes), "0..n-1")
    if ids.size == num_nodes and np.unique(ids).size == num_nodes and np.isin(ids, known.ids).all():
        out = np.empty_like(x)
        out[known.index(ids, f"{path}: the features rows' ids")] = x
        return out
    if np.array_equal(ids, np.arange(ids.size)):
        return x  # pandas' RangeIndex: rows in node-index order (the labels file's row order)
    raise ValueError(f"{path}: the first column (header {id_name!r}) holds node ids that are neither the labels "
                     f"file's {num_nodes} ids nor 0..{ids.size - 1} in row order (e.g. {ids[:5].tolist()})")


def _features_by_id(path, rows, num_nodes: int, index) -> np.ndarray:
    """The rows of a text features file whose first column is the node id (``id,x1,x2,...`` per line, ids as in the
    labels file, e.g. ``n17``), placed by id, in any order. Every node needs exactly one row.

    Raises:
        ValueError: integer node ids (no id column then), ragged or non-numeric rows, repeated ids, ids unknown to
            the labels file, nodes without a row (file, line and ids named).
    """
    ids = np.array([t[0].decode(errors="replace") for _, t in rows])
    if index is None or np.issubdtype(index.ids.dtype, np.integer):
        raise ValueError(f"{path}: line {rows[0][0]}: the first column holds non-numeric ids ({str(ids[0])!r}) but "
                         "the graph's node ids are integers: give the features in node order, without an id column")
    x = _numeric_rows(path, rows, id_column=True)
    uniq, counts = np.unique(ids, return_counts=True)
    if np.any(counts > 1):
        raise ValueError(f"{path}: {int(np.sum(counts > 1))} node id(s) have more than one features row, e.g. "
                         f"{uniq[counts > 1][:5].tolist()}")
    at = index.index(ids, f"{path}: the features rows' ids")
    if at.size != num_nodes:
        missing = np.setdiff1d(np.arange(num_nodes), at)
        raise ValueError(f"{path}: {missing.size} of {num_nodes} nodes have no features row, e.g. "
                         f"{index.ids[missing[:5]].tolist()}")
    out = np.empty_like(x)
    out[at] = x
    return out


def _npz_kind(path) -> str:
    try:
        with np.load(path, allow_pickle=False) as z:
            keys = set(z.files)
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: not a readable .npz file ({err})") from None
    if set(HETEROPHILOUS_KEYS) <= keys:
        return "platonov"
    if set(SHCHUR_ADJ_KEYS) <= keys and "labels" in keys:
        return "shchur"
    raise ValueError(f"{path}: unknown .npz layout, keys {sorted(keys)}. Expected either the Platonov et al. "
                     f"layout {list(HETEROPHILOUS_KEYS)} (+ optional train_masks/val_masks/test_masks) or the "
                     f"Shchur et al. CSR layout {list(SHCHUR_ADJ_KEYS)} + attr_* + labels")


_WEIGHT_NAMES = ("weight", "weights", "w", "value", "strength", "count", "score")


def _report_unused_weight_column(path, data: bytes) -> None:
    """Warns where an edge list read without ``weighted`` has a header naming its third column as a weight
    (``source,target,weight``): the column is ignored, as documented, and a user who meant it learns how.
    ``data``: the file's text (:func:`read_text_bytes`)."""
    for line in data.split(b"\n", 50)[:50]:
        toks = [t for t in _fields(line) if t]
        if not toks or toks[0].startswith(b"#"):
            continue
        if len(toks) >= 3 and not _is_number(toks[0]) and toks[2].decode(errors="replace").lower() in _WEIGHT_NAMES:
            warnings.warn(f"{path}: the third column ({toks[2].decode(errors='replace')!r}) is ignored: the graph is "
                          "unweighted unless you pass --weighted (load_file(..., weighted=True))", UserWarning,
                          stacklevel=4)
        return


def _report_cleanup(path, edge_index: np.ndarray, num_nodes: int, weighted: bool, ids=None) -> None:
    """Warns about the lines of an edge list that the graph options change (harmless: the graph is what the file
    means): self-loop lines, dropped, and lines that repeat an earlier (source, target) pair exactly, merged into
    one edge (a weighted one keeps the largest weight). A pair listed in both directions is an undirected edge
    written twice, the usual layout, and is not reported. ``ids``: the node ids of the indices (None: the same)."""
    src, dst = (np.asarray(v, np.int64) for v in edge_index)
    loop = src == dst
    keys = np.sort(src[~loop] * np.int64(num_nodes) + dst[~loop])  # a sort: 60x faster than np.unique at 1e6
    repeated = int(np.count_nonzero(keys[1:] == keys[:-1]))
    parts = []
    if loop.any():
        first = int(src[loop][0])
        example = first if ids is None else ids[first]
        parts.append(f"{int(loop.sum())} self-loop line(s) dropped (e.g. node {example})")
    if repeated:
        parts.append(f"{repeated} line(s) repeat an edge listed earlier and were merged into it"
                     + (" (its largest weight kept)" if weighted else ""))
    if parts:
        warnings.warn(f"{path}: " + "; ".join(parts), UserWarning, stacklevel=3)


def _replace_labels(raw: RawData, path, labels, id_column, label_column, fmt: str) -> RawData:
    """``raw`` (a ``.npz`` or an OGB folder) with the labels of the file ``labels`` instead of its own: rows
    ``node,label`` whose ids are the graph's node indices 0..n-1 (one label per line: nodes 0, 1, ... in order);
    a node the file does not list is unlabelled. A warning (the CLI's one line) says that the file's labels are
    replaced, and how many nodes are left unlabelled.

    Raises:
        ValueError: ids that are not integers or lie outside 0..n-1 (naming the file and the way out).
    """
    n = int(raw.num_nodes)
    ids, raw_labels = read_labels_file(labels, id_column, label_column)
    if raw.node_ids is not None:
        at = IdIndex(raw.node_ids, str(path)).index(ids, f"the node ids of {labels}")
    else:
        if ids.dtype.kind not in "iu":
            raise ValueError(f"{labels}: node ids must be the node indices 0..{n - 1} of {path} (its nodes are "
                             f"numbered so); got {ids[:3].tolist()}")
        bad = ids[(ids < 0) | (ids >= n)]
        if bad.size:
            raise ValueError(f"{labels}: {bad.size} node id(s) outside the nodes 0..{n - 1} of {path}, e.g. "
                             f"{bad[:5].tolist()}; a labels file for a {fmt} names its nodes by index 0..{n - 1}")
        at = ids.astype(np.int64)
    codes_in_file, classes = _encode_with_unlabelled(raw_labels, labels)
    codes = np.full(n, -1, dtype=np.int32)
    codes[at] = codes_in_file
    absent = n - int(np.unique(at).size)
    warnings.warn(f"{labels}: these labels replace the labels of {path} ({fmt}; node ids = its node indices "
                  f"0..{n - 1})" + (f"; the {absent} of its {n} nodes the file does not list are unlabelled (in "
                                    "the graph, in no split, never scored)" if absent else ""),
                  UserWarning, stacklevel=3)
    if not (codes >= 0).any():
        raise ValueError(f"{labels}: no node of {path} gets a label")
    return dataclasses.replace(raw, labels=codes, num_classes=int(classes.shape[0]),
                               info={**dict(raw.info), "label_values": classes.tolist()})


GENERIC_STEMS = ("edges", "edge", "edgelist", "edge_list", "edge-list", "graph", "network", "links", "adjacency",
                 "adj", "data", "net", "input", "")
"""File stems (after :func:`graph_name` strips an ``_edges`` suffix) that say nothing of the graph: such a graph is
named after its folder (``twitch/PTBR/edges.csv`` -> ``PTBR``)."""
_EDGE_SUFFIXES = ("_edges", "-edges", ".edges", "_edgelist", "-edgelist", "_edge_list", "_edge", "-edge")
_GENERIC_FOLDERS = ("raw", "data", "files", "input", "graph", "graphs", "")


def graph_name(path) -> str:
    """The dataset name of a graph file or folder (the records' ``dataset`` when ``name`` is not given): an OGB
    folder's name; else the file name without its extensions (``.csv.gz``) and an ``_edges``/``-edges``/``.edges``
    suffix (``musae_PTBR_edges.csv`` -> ``musae_PTBR``); a generic name (``edges.csv``, ``graph.npz``,
    :data:`GENERIC_STEMS`) is named after its folder (skipping folders such as ``raw`` or ``data``)."""
    path = Path(path)
    root = ogb_root(path)
    if root is not None:
        return root.resolve().name or root.name
    stem = path.name.split(".")[0]
    for suffix in _EDGE_SUFFIXES:
        if stem.lower().endswith(suffix) and len(stem) > len(suffix):
            stem = stem[:-len(suffix)]
            break
    if stem.lower() not in GENERIC_STEMS:
        return stem
    for folder in list(path.resolve().parents)[:3]:
        if folder.name.lower() not in _GENERIC_FOLDERS:
            return folder.name
    return stem or "graph"


def load_file(path, *, labels=None, features=None, directed: bool = False, weighted: bool = False,
              name: str | None = None, id_column: str | None = None, label_column: str | None = None) -> Dataset:
    """Loads a user's graph from files (see the module docstring for the formats).

    Args:
        path: a ``.npz`` (Platonov or Shchur layout), an OGB node-property folder (:mod:`jaxclp.datasets.ogb`), or
            an edge-list file (CSV/TSV/whitespace; gzip/bz2/xz compressed files are read as well).
        labels: labels file; required for an edge list. With a ``.npz`` or an OGB folder it replaces the labels
            they hold (``node,label`` rows, ids the node indices 0..n-1; a node it does not list is unlabelled;
            a warning says so).
        features: optional features file for an edge list (``.npy``, ``.npz`` CSR, or CSV); without it the
            dataset is featureless (the runner then uses ``log(degree + 1)``, see
            :func:`jaxclp.datasets.node_features`).
        directed: keep the listed edge direction (default: undirected, both directions stored).
        weighted: an edge list's third column is the edge weight (finite, nonnegative; an edge listed twice keeps
            its largest weight, and the reverse edge of an undirected graph gets the same weight). Every
            normalization (``"sym"``, ``"row"``), degree and GNN aggregation is then weighted.
        name: dataset name (default: :func:`graph_name`, the file name without extensions and an ``_edges``
            suffix, or the folder's name for a generic file name such as ``edges.csv``).
        id_column, label_column: header names of the node id and label columns of a labels CSV with more
            columns (:func:`read_labels_file`; ``jaxclp run --id-column ... --label-column ...``).

    Returns:
        :class:`Dataset` (metric ``"accuracy"``; ``splits`` = the published masks of a Platonov npz or the split
        of an OGB folder, else None;
        ``info["label_values"]`` = the original label of each class code for an edge list).

    Raises:
        FileNotFoundError: a file does not exist.
        ValueError: malformed input; the message names the file and the problem (wrong keys, ids out of range
            or not in the labels file, label count mismatch, non-numeric rows with their line numbers).
    """
    path = Path(path)
    root = ogb_root(path)
    for what, f in (("graph", path), ("labels", labels), ("features", features)):
        if f is not None and not Path(f).is_file() and not (what == "graph" and root is not None):
            if Path(f).is_dir() and what == "graph":
                raise ValueError(f"{what} {f} is a folder: an OGB node-property folder holds raw/edge.csv.gz or "
                                 "raw/data.npz; other graphs are files")
            if Path(f).is_dir():
                inside = sorted(p.name for p in Path(f).iterdir() if p.is_file() and not p.name.startswith("."))
                hint = f" (it holds {', '.join(inside[:4])}{', ...' if len(inside) > 4 else ''})" if inside else ""
                raise ValueError(f"--{what} {f} is a folder, not a file: pass the {what} file itself{hint}")
            raise FileNotFoundError(f"{what} file {f} does not exist")
    if (id_column is not None or label_column is not None) and labels is None:
        raise ValueError(f"{path}: id_column/label_column (--id-column/--label-column) name columns of the labels "
                         "file of an edge list; pass labels= (--labels) too")
    for what, f in (("graph", path), ("labels", labels), ("features", features)):
        if f is not None and not (what == "graph" and root is not None):
            check_format(f, what)
    name = name or graph_name(path)
    info = {"files": {"graph": str(path)}, "source": "load_file"}
    if root is not None:
        if features is not None or weighted:
            raise ValueError(f"{path}: features= and weighted= apply to an edge-list file; an OGB folder holds its "
                             "own features and edges (labels= may replace its labels)")
        raw = read_ogb_folder(root)
        info["format"] = "ogb folder"
    elif path.suffix.lower() == ".npz":
        if features is not None or weighted:
            raise ValueError(f"{path}: features= and weighted= apply to an edge-list file; a .npz holds its own "
                             "features and edges (labels= may replace its labels)")
        kind = _npz_kind(path)
        try:
            if kind == "platonov":
                raw = read_heterophilous_npz(path)
            else:
                raw = read_shchur_npz(path)
        except ValueError as err:
            msg = str(err)
            if "allow_pickle" in msg:
                raise ValueError(f"{path}: an array needs pickle to load; refusing to unpickle it") from None
            raise ValueError(msg if msg.startswith(path.name) or str(path) in msg else f"{path}: {msg}") from None
        if raw.features is not None:
            _check_finite_features(path, raw.features, None)
        info["format"] = f"{kind} npz"
    if labels is not None and (root is not None or path.suffix.lower() == ".npz"):
        raw = _replace_labels(raw, path, labels, id_column, label_column, info["format"])
        info["files"].update(labels=str(labels))
    elif root is None and path.suffix.lower() != ".npz":
        if labels is None:
            raise ValueError(f"{path}: an edge-list file needs labels=<labels file> (node,label rows or one label "
                             "per line); or pass a .npz in the Platonov or Shchur layout")
        ids, raw_labels = read_labels_file(labels, id_column, label_column)
        idx, row_to_index = IdIndex.from_rows(ids, os.path.basename(str(labels)))
        by_index = np.empty_like(raw_labels)
        by_index[row_to_index] = raw_labels
        codes, classes = _encode_with_unlabelled(by_index, labels)
        string_ids = None if ids.dtype.kind in "iu" else ids
        text = None if _format_suffix(path) in _ARRAY_FORMATS else read_text_bytes(path)
        edges, weights = _read_edges(path, string_ids, weighted, text)
        if text is not None and not weighted:
            _report_unused_weight_column(path, text)
        if np.asarray(edges).size == 0:
            raise ValueError(f"{path}: no edges (no 'u,v' line{' below its header' if text and text.strip() else ''})"
                             f"; write one edge per line, e.g. '0,1' (without edges CLP has nothing to propagate "
                             "over)")
        way_out = ("; list every node of the graph in the labels file, an unlabelled one with an empty label (a "
                   "line 'ID,')")
        if idx.is_identity and edges.size and (edges.min() < 0 or edges.max() >= len(idx)):
            bad = np.unique(edges[(edges < 0) | (edges >= len(idx))])
            way_out = way_out.replace("'ID,'", f"'{bad[0]},'")
            raise ValueError(f"{path}: {bad.size} node id(s) out of range [0, {len(idx)}) of the labels file "
                             f"{labels}, e.g. {bad[:5].tolist()}{way_out}")
        try:
            edge_index = idx.index(edges, f"edges of {path}").reshape(2, -1)
        except ValueError as err:
            raise ValueError(f"{err} (labels file {labels}){way_out}") from None
        if not np.any(edge_index[0] != edge_index[1]):
            raise ValueError(f"{path}: every one of its {edge_index.shape[1]} edge line(s) is a self-loop (u,u), and "
                             "self-loops are dropped: no edges are left; write one edge between two nodes per line")
        _report_cleanup(path, edge_index, len(idx), weighted, None if idx.is_identity else idx.ids)
        feats = None if features is None else read_features_file(features, len(idx), idx)
        raw = RawData(edge_index=edge_index, num_nodes=len(idx), labels=codes, num_classes=int(classes.shape[0]),
                      features=feats, node_ids=None if idx.is_identity else idx.ids,
                      info={"label_values": classes.tolist()}, edge_weight=weights)
        info["format"] = "weighted edge list" if weighted else "edge list"
        info["files"].update(labels=str(labels), features=None if features is None else str(features))
    ds = build_dataset(raw, name, "accuracy", directed=directed, info=info)
    _report_small_classes(ds, str(labels if labels is not None else path))
    return ds


MANY_CLASSES = 50
"""Above this many classes, labels of which most classes hold a single labelled node are refused (a column of
values or ids read as labels: MUSAE's ``views`` gave 5822 classes for 7126 nodes)."""


def _report_small_classes(ds: Dataset, where: str) -> None:
    """Refuses labels whose labelled nodes hold fewer than two classes (ValueError naming ``where`` and the label),
    or more than :data:`MANY_CLASSES` classes, most with a single labelled node (values or ids, not classes);
    warns about classes with fewer than 3 labelled nodes: no split can hold one in each of train, validation and
    test, so such a class may never be trained on, or never scored."""
    counts = ds.class_counts
    present = np.flatnonzero(counts > 0)
    singletons = int(np.sum(counts == 1))
    if present.size > MANY_CLASSES and singletons > present.size // 2:
        raise ValueError(f"{where}: {present.size} distinct labels for {int(counts.sum())} labelled nodes, "
                         f"{singletons} of them on a single node: a label names a class, and these look like "
                         "values or ids (a count, a date, an id column); choose the column of classes (--label-column "
                         "/ label_column=), or bin the values into a few classes first")
    if present.size == 1:  # no labelled node at all: refused before, by the parsers ("every node is unlabelled")
        raise ValueError(f"{where}: every labelled node ({int(counts.sum())}) has label "
                         f"{str(ds.label_values[present[0]])!r}; a classifier needs labelled nodes of at least two "
                         "classes")
    small = np.flatnonzero(counts < 3)
    if small.size:
        listed = ", ".join(f"{ds.label_values[k]} ({int(counts[k])})" for k in small[:5])
        more = f" and {small.size - 5} more" if small.size > 5 else ""
        warnings.warn(f"{where}: {small.size} class(es) with fewer than 3 labelled nodes, label (count): {listed}"
                      f"{more}; no split can put one in each of train, validation and test, so such a class may "
                      "go untrained or unscored", UserWarning, stacklevel=3)
