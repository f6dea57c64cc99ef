"""MUSAE / FEATHER csv+json formats (Rozemberczki et al.): Twitch gamer networks and deezer-europe.

* Twitch (``twitch/<LANG>/musae_<LANG>_{edges.csv,target.csv,features.json}``, LANG in DE, ENGB, ES, FR,
  PTBR, RU, TW): node index = ``new_id`` (the id used by the edges and the features json; the target rows are
  not in new_id order); label = ``mature`` (True/False -> 1/0), as in LINKX and the CLP paper.
* deezer-europe (``deezer_europe_{edges.csv,target.csv}`` + optional ``deezer_europe_features.json`` + LINKX's
  ``deezer-europe-splits.npy``): node index = ``id``; label = ``target`` (0/1).

Features are lists of active feature ids per node, turned into a multi-hot (n, d) matrix.
"""

from __future__ import annotations

import json

import numpy as np
import scipy.sparse as sp

from jaxclp.datasets._base import RawData
from jaxclp.datasets._text import (IdIndex, basename, first_of_duplicates, parse_table, read_bytes, read_text_bytes,
                                  split_header)

__all__ = ["read_csv_columns", "read_multihot_json", "read_musae_twitch", "read_feather_deezer",
           "TWITCH_LANGUAGES", "TWITCH_VOCAB_SIZE"]

TWITCH_LANGUAGES = ("DE", "ENGB", "ES", "FR", "PTBR", "RU", "TW")
TWITCH_VOCAB_SIZE = 3170  # feature ids share one vocabulary 0..3169 across languages (LINKX)


def read_csv_columns(path) -> dict[str, np.ndarray]:
    """Reads a numeric csv with one header line; ``True``/``False`` become 1/0.

    Returns:
        dict column name -> (rows,) int64 array.
    """
    data = read_bytes(path)
    (header,), _ = split_header(data, 1, basename(path))
    names = [h.strip().decode() for h in header.split(b",")]
    table = parse_table(data, len(names), header_lines=1, where=basename(path),
                        replace={b"True": b"1", b"False": b"0", b"true": b"1", b"false": b"0"})
    return {nm: table[:, j] for j, nm in enumerate(names)}


def read_multihot_json(path, index: IdIndex, vocab="used") -> tuple[sp.csr_matrix, np.ndarray]:
    """Reads ``{"<node id>": [feature ids, ...]}`` into a multi-hot matrix.

    Args:
        path: json file.
        index: id -> node index map (nodes missing from the json get an all-zero row); its ids may be strings
            (the JSON keys are then matched as strings).
        vocab: ``"used"`` (one column per feature id that occurs, in increasing id order), ``"global"``
            (column = feature id, width max id + 1) or an int width (column = feature id).

    Returns:
        ``(features, column_ids)``: (n, d) float32 CSR 0/1 matrix, and (d,) the feature id of each column.
    """
    try:
        obj = json.loads(read_text_bytes(path))
    except json.JSONDecodeError as err:
        raise ValueError(f"{basename(path)}: not valid JSON ({err})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{basename(path)}: expected a JSON object {{node id: [feature ids]}}")
    try:
        keys = (np.array(list(obj.keys())) if index.ids.dtype.kind in "US"  # string node ids
                else np.array([int(k) for k in obj.keys()], dtype=np.int64))
        lists = [np.asarray(v, dtype=np.int64).reshape(-1) for v in obj.values()]
    except (TypeError, ValueError) as err:
        raise ValueError(f"{basename(path)}: bad entry ({err})") from None
    rows = np.repeat(index.index(keys, f"keys of {basename(path)}"), [a.shape[0] for a in lists])
    fids = np.concatenate(lists) if lists else np.zeros(0, np.int64)
    if fids.size and fids.min() < 0:
        raise ValueError(f"{basename(path)}: negative feature id")
    if vocab == "used":
        column_ids, cols = np.unique(fids, return_inverse=True)
    else:
        width = int(fids.max()) + 1 if fids.size else 0
        if vocab != "global":
            if int(vocab) < width:
                raise ValueError(f"{basename(path)}: feature id {width - 1} does not fit vocab width {vocab}")
            width = int(vocab)
        column_ids, cols = np.arange(width), fids
    x = sp.csr_matrix((np.ones(fids.size, np.float32), (rows, cols.reshape(-1))),
                      shape=(len(index), column_ids.shape[0]))
    x.sum_duplicates()
    x.data[:] = 1.0
    return x, column_ids


def read_musae_twitch(edges_path, target_path, features_path=None, vocab="used") -> RawData:
    """Reads one MUSAE Twitch language network.

    Args:
        edges_path: ``musae_<LANG>_edges.csv`` (header ``from,to``; each friendship listed once).
        target_path: ``musae_<LANG>_target.csv`` (header ``id,days,mature,views,partner,new_id``). A
            ``new_id`` listed twice with the same ``mature`` is accepted with a warning (first row kept);
            with different values it is refused (ValueError naming the ids).
        features_path: ``musae_<LANG>_features.json`` (optional).
        vocab: ``"used"`` (default: one column per feature id occurring in this language; ENGB -> 2545,
            RU -> 2224), ``"global"`` (the shared 3170-id vocabulary, as LINKX) or an int width.

    Returns:
        :class:`RawData` (node index = new_id); ``node_ids`` = the original Twitch ``id`` of each node.
    """
    cols = read_csv_columns(target_path)
    for need in ("new_id", "mature"):
        if need not in cols:
            raise ValueError(f"{basename(target_path)}: missing column {need!r} (has {list(cols)})")
    keep = first_of_duplicates(cols["new_id"], cols["mature"], basename(target_path))
    cols = {k: v[keep] for k, v in cols.items()}
    idx, row_to_index = IdIndex.from_rows(cols["new_id"], f"{basename(target_path)} (new_id)")
    if not idx.is_identity:
        raise ValueError(f"{basename(target_path)}: new_id must be 0..n-1")
    labels = np.empty(len(idx), np.int64)
    labels[row_to_index] = cols["mature"]
    twitch_ids = None
    if "id" in cols:
        twitch_ids = np.empty(len(idx), np.int64)
        twitch_ids[row_to_index] = cols["id"]
    e = read_csv_columns(edges_path)
    raw = np.stack([e[k] for k in list(e)[:2]])
    edge_index = idx.index(raw, f"edges of {basename(edges_path)}").reshape(2, -1)
    feats, column_ids = None, None
    if features_path is not None:
        if vocab == "global":
            vocab = TWITCH_VOCAB_SIZE
        feats, column_ids = read_multihot_json(features_path, idx, vocab)
    return RawData(edge_index=edge_index, num_nodes=len(idx), labels=labels.astype(np.int32), num_classes=2,
                   features=feats, node_ids=twitch_ids,
                   info={} if column_ids is None else {"feature_ids": column_ids.tolist()})


def read_feather_deezer(edges_path, target_path, features_path=None, splits_path=None,
                        vocab="global") -> RawData:
    """Reads deezer-europe (FEATHER release) with LINKX's fixed splits.

    Args:
        edges_path: ``deezer_europe_edges.csv`` (header ``node_1,node_2``; each edge listed once).
        target_path: ``deezer_europe_target.csv`` (header ``id,target``). Repeated ids: as for Twitch (same
            target: first row kept with a warning; different targets: ValueError naming the ids).
        features_path: ``deezer_europe_features.json`` or None (then ``features`` is None).
        splits_path: LINKX ``deezer-europe-splits.npy`` (object array of dicts with index arrays ``train``,
            ``valid``, ``test``), or None.
        vocab: feature columns, see :func:`read_multihot_json` (default ``"global"``: column = feature id,
            31241 columns in the original release).

    Returns:
        :class:`RawData`; splits as bool masks of shape (5, n).
    """
    cols = read_csv_columns(target_path)
    if "target" not in cols:
        raise ValueError(f"{basename(target_path)}: missing column 'target' (has {list(cols)})")
    id_col = cols["id"] if "id" in cols else np.arange(cols["target"].shape[0])
    keep = first_of_duplicates(id_col, cols["target"], basename(target_path))
    id_col = id_col[keep]
    cols = {k: v[keep] for k, v in cols.items()}
    idx, row_to_index = IdIndex.from_rows(id_col, basename(target_path))
    labels = np.empty(len(idx), np.int64)
    labels[row_to_index] = cols["target"]
    e = read_csv_columns(edges_path)
    raw = np.stack([e[k] for k in list(e)[:2]])
    edge_index = idx.index(raw, f"edges of {basename(edges_path)}").reshape(2, -1)
    feats = None
    info = {}
    if features_path is not None:
        feats, column_ids = read_multihot_json(features_path, idx, vocab)
        if vocab == "used":
            info["feature_ids"] = column_ids.tolist()
    splits = None
    if splits_path is not None:
        arr = np.load(splits_path, allow_pickle=True)  # sha256-verified file of pickled dicts
        n = len(idx)
        masks = {k: np.zeros((len(arr), n), bool) for k in ("train", "valid", "test")}
        for i, d in enumerate(arr):
            for k in masks:
                if k not in d:
                    raise ValueError(f"{basename(splits_path)}: split {i} has no {k!r} key")
                masks[k][i, idx.index(np.asarray(d[k], dtype=np.int64), f"split {i} {k}")] = True
        splits = (masks["train"], masks["valid"], masks["test"])
    return RawData(edge_index=edge_index, num_nodes=len(idx), labels=labels.astype(np.int32), num_classes=2,
                   features=feats, splits=splits, node_ids=None if idx.is_identity else idx.ids, info=info)
