"""Fast, strict parsing of numeric text tables (vectorized through numpy's C parser, no per-line Python)."""

from __future__ import annotations

import os
import warnings

import numpy as np

__all__ = ["read_bytes", "read_text_bytes", "decompress", "compression", "parse_table", "split_header", "IdIndex",
           "first_of_duplicates"]


COMPRESSIONS = ("gzip", "bz2", "xz")
"""Compressions :func:`decompress` (and so :func:`read_text_bytes`) undoes, recognized by their magic bytes
(whatever the file is called)."""

_BZ2_BLOCK = (b"\x31\x41\x59\x26\x53\x59", b"\x17\x72\x45\x38\x50\x90")  # a first block, or an empty stream


def compression(data: bytes) -> str | None:
    """The compression of a file's first bytes: ``"gzip"``, ``"bz2"``, ``"xz"``, ``"zip"``, ``"zstd"`` or None."""
    if data[:2] == b"\x1f\x8b":
        return "gzip"
    if data[:3] == b"BZh" and data[3:4].isdigit() and data[4:10] in _BZ2_BLOCK:
        return "bz2"
    if data[:6] == b"\xfd7zXZ\x00":
        return "xz"
    if data[:4] == b"PK\x03\x04":
        return "zip"
    if data[:4] == b"\x28\xb5\x2f\xfd":
        return "zstd"
    return None


def decompress(data: bytes, where: str = "file") -> bytes:
    """``data`` with a gzip, bz2 or xz compression undone (several layers too); anything else unchanged.

    Raises:
        ValueError: corrupt or truncated compressed data (naming ``where``).
    """
    import bz2
    import gzip
    import lzma

    while (kind := compression(data)) in COMPRESSIONS:
        try:
            data = {"gzip": gzip.decompress, "bz2": bz2.decompress, "xz": lzma.decompress}[kind](data)
        except (OSError, EOFError, ValueError, lzma.LZMAError) as err:
            raise ValueError(f"{where}: corrupt or truncated {kind} data ({err})") from None
    return data


def read_bytes(path) -> bytes:
    """Reads a whole file as bytes."""
    with open(path, "rb") as f:
        return f.read()


def read_text_bytes(path) -> bytes:
    """A user's text file as UTF-8 bytes, as pandas and spreadsheet exports write them.

    A gzip, bz2 or xz compressed file is decompressed (recognized by its magic bytes, whatever its name: OGB's
    ``edge.csv.gz``, SNAP's ``.txt.gz``); a UTF-8 byte-order mark (Excel's "CSV UTF-8") is dropped (read as text,
    it would make the first row's first field a non-number: a header, and the row silently lost); UTF-16 text
    with its byte-order mark (Excel's "Unicode text") is re-encoded as UTF-8; lines ended by CR alone (Excel for
    Mac's "CSV (Macintosh)") become lines.

    Raises:
        ValueError: a zip or zstd archive (extract it first), other binary content (a NUL byte: e.g. a ``.npy``
            given where a text table is read), corrupt compressed data; each naming the file.
    """
    where = str(path)
    data = decompress(read_bytes(path), where)
    kind = compression(data)
    if kind == "zip":
        raise ValueError(f"{where}: a zip archive (or a numpy .npz), not a text table; extract the table and pass "
                         "that file")
    if kind == "zstd":
        raise ValueError(f"{where}: zstd-compressed; decompress it first (gzip, bz2 and xz are read directly)")
    if data[:3] == b"\xef\xbb\xbf":
        data = data[3:]
    elif data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        try:
            data = data.decode("utf-16").encode("utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(f"{where}: UTF-16 text that does not decode ({err})") from None
    nul = data.find(b"\x00", 0, 1 << 16)
    if nul >= 0:
        raise ValueError(f"{where}: binary content (a NUL byte at offset {nul}), not a text table: edge lists, "
                         "labels and text features are CSV/TSV/whitespace text (optionally gzip/bz2/xz compressed); "
                         "features may also be .npy/.npz")
    if b"\r" in data and b"\n" not in data:  # classic Mac line ends (Excel for Mac's "CSV (Macintosh)")
        data = data.replace(b"\r", b"\n")
    return data


def split_header(data: bytes, header_lines: int, where: str = "file") -> tuple[list[bytes], bytes]:
    """Splits off the first ``header_lines`` lines.

    Returns:
        ``(header_lines_list, body)``.
    """
    header = []
    pos = 0
    for _ in range(header_lines):
        nl = data.find(b"\n", pos)
        if nl < 0:
            raise ValueError(f"{where}: expected {header_lines} header line(s), file is too short")
        header.append(data[pos:nl].rstrip(b"\r"))
        pos = nl + 1
    return header, data[pos:]


_SEPARATORS = b",\t;"
_TO_SPACE = bytes.maketrans(_SEPARATORS, b" " * len(_SEPARATORS))


def parse_table(data: bytes, ncols: int, *, header_lines: int = 0, dtype=np.int64, where: str = "file",
                replace: dict[bytes, bytes] | None = None) -> np.ndarray:
    """Parses a rectangular numeric text table.

    Separators may be spaces, tabs, commas or semicolons, line ends LF or CRLF. Every non-blank line must
    hold exactly ``ncols`` numbers.

    Args:
        data: file content.
        ncols: number of columns.
        header_lines: lines to skip at the top.
        dtype: numpy dtype of the result.
        where: file name for error messages.
        replace: byte substitutions applied first (e.g. ``{b"True": b"1"}``).

    Returns:
        (rows, ncols) array.

    Raises:
        ValueError: non-numeric tokens or rows with a different number of columns.
    """
    _, body = split_header(data, header_lines, where)
    for old, new in (replace or {}).items():
        body = body.replace(old, new)
    body = body.translate(_TO_SPACE)
    lines = [ln for ln in body.split(b"\n") if ln.strip()] if ncols > 1 else None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            flat = np.fromstring(body, dtype=dtype, sep=" ") if body.strip() else np.zeros(0, dtype)
    except (ValueError, DeprecationWarning) as err:
        raise ValueError(f"{where}: could not parse numeric table ({err})") from None
    nrows = len(lines) if lines is not None else flat.size
    if flat.size != nrows * ncols:
        raise ValueError(f"{where}: expected {ncols} numbers on each of {nrows} lines, "
                         f"got {flat.size} numbers in total")
    return flat.reshape(nrows, ncols)


class IdIndex:
    """Explicit map from original node ids to node indices 0..n-1.

    Args:
        ids: (n,) original ids; ``ids[i]`` is the id of node i. Must be unique.
        where: file name for error messages.
    """

    def __init__(self, ids, where: str = "node list"):
        self.ids = np.asarray(ids)
        self.where = where
        self._order = np.argsort(self.ids, kind="stable")
        self._sorted = self.ids[self._order]
        if self._sorted.size > 1 and np.any(self._sorted[1:] == self._sorted[:-1]):
            dup = self._sorted[1:][self._sorted[1:] == self._sorted[:-1]]
            raise ValueError(f"{where}: repeated node ids, e.g. {dup[:5].tolist()}")

    @classmethod
    def from_rows(cls, row_ids, where: str = "node list") -> tuple["IdIndex", np.ndarray]:
        """Builds the map from the id column of a node file (one row per node).

        Rule: if the ids are exactly 0..n-1 (in any row order) node index = id; otherwise node index = row
        number in the file. Never depends on the order in which nodes appear in an edge list.

        Args:
            row_ids: (n,) id of each row of the node file.
            where: file name for error messages.

        Returns:
            ``(index, row_to_index)``: the map, and (n,) index of each file row (use it to place per-row data:
            ``data_by_index[row_to_index] = data_by_row``).
        """
        row_ids = np.asarray(row_ids)
        n = row_ids.shape[0]
        if np.issubdtype(row_ids.dtype, np.integer) and n and row_ids.min() == 0 and row_ids.max() == n - 1 \
                and np.unique(row_ids).size == n:
            return cls(np.arange(n, dtype=row_ids.dtype), where), row_ids.astype(np.int64)
        return cls(row_ids, where), np.arange(n, dtype=np.int64)

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    @property
    def is_identity(self) -> bool:
        """True when ids[i] == i for all i."""
        return bool(np.array_equal(self.ids, np.arange(len(self))))

    def index(self, query, what: str = "ids") -> np.ndarray:
        """Maps ids to indices; raises ValueError naming unknown ids."""
        q = np.asarray(query)
        pos = np.searchsorted(self._sorted, q)
        pos_c = np.minimum(pos, max(len(self) - 1, 0))
        ok = (pos < len(self)) & (self._sorted[pos_c] == q) if len(self) else np.zeros(q.shape, bool)
        if not np.all(ok):
            bad = np.unique(q[~ok])
            raise ValueError(f"{what} contain {bad.size} node id(s) that are not in {self.where}, "
                             f"e.g. {bad[:5].tolist()}")
        return self._order[pos_c].astype(np.int64)


def first_of_duplicates(ids, labels, where: str = "file") -> np.ndarray:
    """Rows to keep when a node file lists some node ids more than once.

    A repeated id with the same label on every row is accepted (the first row is kept, as pandas-based reference
    loaders do) with a warning; a repeated id with different labels is refused.

    Args:
        ids: (rows,) node id of each row.
        labels: (rows,) label of each row.
        where: file name for messages.

    Returns:
        (rows,) bool mask, True on the first row of each id.

    Raises:
        ValueError: some id appears with different labels (the message names up to 10 such ids and their labels).
    """
    ids = np.asarray(ids)
    labels = np.asarray(labels)
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    keep = np.zeros(ids.shape[0], bool)
    keep[first] = True
    if keep.all():
        return keep
    conflict = labels != labels[first][inverse]
    if conflict.any():
        bad = np.unique(ids[conflict])
        detail = ", ".join(f"{i!r}: {sorted(set(labels[ids == i].tolist()))}" for i in bad[:10].tolist())
        # most ids repeated: the rows are edges (u,v), the labels file given as the edge list's place was swapped
        swapped = ("; it reads like an edge list (most node ids repeat): --graph takes the edges, --labels the "
                   "'node,label' rows" if ids.size - first.size > ids.size // 4 else "")
        raise ValueError(f"{where}: {bad.size} node id(s) listed more than once with different labels "
                         f"({detail}); fix the file{swapped}")
    dup = np.unique(ids[~keep])
    warnings.warn(f"{where}: {dup.size} node id(s) listed more than once with the same label, e.g. "
                  f"{dup[:5].tolist()}; keeping the first row of each", UserWarning, stacklevel=3)
    return keep


def basename(path) -> str:
    return os.path.basename(str(path))
