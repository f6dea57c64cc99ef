"""The records file: key, append, read, resume, stale.

A run's folder holds ``results.jsonl`` (:data:`RESULTS_FILE`): one JSON line per record, a header record per
invocation (:func:`header_record`: versions, git commit, argv) and one result record per (dataset, split, run,
method), the record's key (:class:`RecordKey`, built by :func:`record_key`: code that indexes records builds that
key with it rather than picking the four fields by hand, so the fields and their order are written once; the last
record of each key is the current one).

Append. Records are appended with a single ``write`` of one line to a file opened with O_APPEND
(:func:`append_record`; atomic for our line sizes on POSIX), so an interrupted run leaves only whole records;
:func:`read_records` ignores a torn last line and :func:`_repair_tail` ends it so the next record starts on its
own line.

Resume. A resumed run skips the keys :func:`done_results` finds: result records of the same configuration hash
(:func:`jaxclp.experiments.identity.config_hash`) and their method's current definition
(:func:`jaxclp.experiments.specs.method_hash`); :func:`reuse_records` copies such records from another folder.

Stale. Results of the same (dataset, split, method) from another configuration or method definition are refused
by :func:`stale_records` with :class:`StaleResultsError`, or moved to ``results.stale.jsonl`` (:data:`STALE_FILE`)
with ``replace_stale=True`` (:func:`replacing_stale` sets the default for a block).

Lock. :func:`folder_lock` holds an advisory lock (``fcntl.flock`` on ``out/.lock``, :data:`LOCK_FILE`; POSIX)
around a run's check-and-run, so concurrent writers of one folder never write a key twice.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Mapping, NamedTuple, Sequence

import jax
import numpy as np

import jaxclp
from jaxclp.experiments.specs import method_spec


class RecordKey(NamedTuple):
    """``(dataset, split, run, method)`` of a result record; a tuple, so keys sort and compare as tuples (by
    dataset, then split, run and method) and a plain 4-tuple finds the same entry of a dict.

    Attributes:
        dataset: the dataset's name as the record holds it (``"texas"``, ``"acm+dagger"``, a user's file name).
        split: the split regime (``"sparse"``, ``"medium"``, ``"dense"``, or a user's).
        run: the split's index (0-based).
        method: the method's name (``"mlp"``, ``"clp"``, ...).
    """

    dataset: str
    split: str
    run: int
    method: str


def record_key(record: Mapping) -> RecordKey:
    """The :class:`RecordKey` of a result record.

    The values are taken as the record holds them (no conversion), so keys built here equal the tuples the
    records were indexed by before.

    Args:
        record: a record as read from ``results.jsonl`` (a dict), of type ``"result"``.

    Returns:
        ``RecordKey(record["dataset"], record["split"], record["run"], record["method"])``.

    Raises:
        ValueError: the record lacks one of the four fields (e.g. a header record, which has no ``method``);
            the message names the missing fields and the record's type.
    """
    missing = [f for f in RecordKey._fields if f not in record]
    if missing:
        raise ValueError(f"a record of type {record.get('type')!r} has no {', '.join(map(repr, missing))} "
                         f"field{'s' if len(missing) > 1 else ''}: only result records have a key "
                         f"({', '.join(RecordKey._fields)})")
    return RecordKey(record["dataset"], record["split"], record["run"], record["method"])


RESULTS_FILE = "results.jsonl"
STALE_FILE = "results.stale.jsonl"
LOCK_FILE = ".lock"


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def header_record(argv: Sequence[str] | None = None) -> dict:
    import flax
    import optax

    return {"type": "header", "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "argv": list(argv or []),
            "jaxclp": jaxclp.__version__, "jax": jax.__version__, "flax": flax.__version__,
            "optax": optax.__version__, "numpy": np.__version__, "python": platform.python_version(),
            "backend": jax.default_backend(), "devices": [str(d) for d in jax.devices()],
            "cpu_count": os.cpu_count(), "git_commit": git_commit()}


def append_record(path: Path, record: dict) -> None:
    """Appends one JSON line atomically (single write, O_APPEND)."""
    line = (json.dumps(record, sort_keys=True, default=_json_default) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def _json_default(x):
    if isinstance(x, (np.generic, jax.Array)):
        return np.asarray(x).item() if np.ndim(x) == 0 else np.asarray(x).tolist()
    return str(x)


def read_records(path: Path) -> list[dict]:
    """All complete records of a results file (a torn last line is ignored)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def reuse_records(src: Path, dst: Path, dataset: str, split: str, chash: str, mhash: dict) -> int:
    """Copies ``src``'s result records of (``dataset``, ``split``) with configuration hash ``chash`` and, per
    method, the method hash ``mhash[method]`` (methods absent from ``mhash`` are not copied) into ``dst`` when
    ``dst`` has no result of that (dataset, split, run, method) of this configuration; the header records of
    that configuration come along (they name the machine and the command that made the copied records).
    Records are copied verbatim. Returns how many results were copied."""
    if not Path(src).exists() or Path(src).resolve() == Path(dst).resolve():
        return 0
    existing = read_records(dst)
    have = {(r["run"], r["method"]) for r in existing if r.get("type") == "result"
            and r.get("dataset") == dataset and r.get("split") == split and r.get("config_hash") == chash
            and r.get("method_hash") == mhash.get(r.get("method"))}
    headers = {json.dumps(r, sort_keys=True) for r in existing if r.get("type") == "header"}
    copied, new_headers = [], []
    for r in read_records(src):
        if r.get("dataset") != dataset or r.get("split") != split or r.get("config_hash") != chash:
            continue
        if r.get("type") == "header":
            if json.dumps(r, sort_keys=True) not in headers:
                new_headers.append(r)
        elif (r.get("type") == "result" and r.get("method_hash") == mhash.get(r.get("method"))
              and (r["run"], r["method"]) not in have):
            have.add((r["run"], r["method"]))
            copied.append(r)
    if copied:
        for r in new_headers + copied:
            append_record(dst, r)
    return len(copied)


class StaleResultsError(ValueError):
    """``out`` holds results of another configuration for the same (dataset, split, method)."""


_REPLACE_STALE = contextvars.ContextVar("jaxclp_replace_stale", default=False)


@contextlib.contextmanager
def replacing_stale(enabled: bool = True):
    """Within the block, :func:`~jaxclp.experiments.runner.run` calls that do not pass ``replace_stale`` use
    ``enabled``."""
    token = _REPLACE_STALE.set(bool(enabled))
    try:
        yield
    finally:
        _REPLACE_STALE.reset(token)


def replace_stale_default(replace_stale: bool | None) -> bool:
    """``replace_stale`` as given, or (None) the :func:`replacing_stale` context's setting: the default of every
    config-keyed writer (:func:`~jaxclp.experiments.runner.run`, the figures' mirror, the selection analysis)."""
    return _REPLACE_STALE.get() if replace_stale is None else bool(replace_stale)


def done_results(path: Path, chash: str, method_hashes: dict) -> set:
    """``(dataset, split, run, method)`` keys of the result records in ``path`` made under configuration ``chash``
    and their method's current definition (``method_hashes``: method -> method_hash): the keys a resumed run
    skips."""
    return {record_key(r) for r in read_records(path)
            if r.get("type") == "result" and r.get("config_hash") == chash
            and r.get("method_hash") == method_hashes.get(r.get("method"))}


def _config_diff(old: dict | None, new: dict) -> str:
    if not old:
        return "no configuration recorded (an older jaxclp)"
    diffs = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            a, b = old.get(key), new.get(key)
            if isinstance(a, dict) and isinstance(b, dict):
                sub = [f"{key}.{s}: {a.get(s)!r} -> {b.get(s)!r}" for s in sorted(set(a) | set(b))
                       if a.get(s) != b.get(s)]
                diffs += sub[:3]
            else:
                diffs.append(f"{key}: {a!r} -> {b!r}")
    return ", ".join(diffs[:4]) or "a different configuration hash"


def _spec_diff(old: dict | None, new: dict) -> str:
    if not old:
        return "no method definition recorded (an older jaxclp)"
    diffs = [f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in ("function", "revision") if old.get(k) != new.get(k)]
    og, ng = old.get("grid") or {}, new.get("grid") or {}
    diffs += [f"grid.{k}: {og.get(k)!r} -> {ng.get(k)!r}" for k in sorted(set(og) | set(ng)) if og.get(k) != ng.get(k)]
    return ", ".join(diffs[:3]) or "a different method hash"


def stale_records(path: Path, dataset: str, split: str, methods, config: dict, chash: str,
                  replace: bool, method_hashes: dict | None = None, extra_types: Sequence[str] = ()) -> list[dict]:
    """Results in ``path`` of (dataset, split, one of methods) from a configuration other than ``chash``, or
    (with ``method_hashes``, method -> :func:`jaxclp.experiments.specs.method_hash`) from another definition of
    their method (records without ``method_hash``, written before it existed, count as another definition);
    also records of a type in ``extra_types`` (per-split analysis records, e.g. the figures' ``"micro"``) of
    (dataset, split) from a configuration other than ``chash``.

    With ``replace=True`` they are moved to ``STALE_FILE`` beside ``path`` (appended there first, then
    ``path`` is rewritten without them, atomically); else :class:`StaleResultsError` is raised. Call with the
    folder lock held.
    """
    methods, extra_types = set(methods), set(extra_types)

    def is_stale(r):
        if r.get("dataset") != dataset or r.get("split") != split:
            return False
        if r.get("type") in extra_types:
            return r.get("config_hash") != chash
        return (r.get("type") == "result" and r.get("method") in methods
                and (r.get("config_hash") != chash
                     or (method_hashes is not None and r.get("method_hash") != method_hashes.get(r["method"]))))

    stale = [r for r in read_records(path) if is_stale(r)]
    if not stale:
        return []
    if not replace:
        last = stale[-1]
        if last.get("config_hash") != chash:
            hashes = sorted({str(r.get("config_hash")) for r in stale})
            why = (f"another configuration ({_config_diff(last.get('config'), config)}; "
                   f"config_hash {', '.join(hashes)} vs {chash})")
        else:
            m = last["method"]
            why = (f"another definition of method {m!r} ({_spec_diff(last.get('method_spec'), method_spec(m))}; "
                   f"method_hash {last.get('method_hash')} vs {method_hashes[m]})")
        raise StaleResultsError(
            f"{path} holds {len(stale)} result(s) of {dataset}/{split} from {why}; "
            f"nothing was run. Use a new --out, or --replace-stale (replace_stale=True) to move them to "
            f"{path.parent / STALE_FILE} and recompute.")
    keep, moved = [], []
    for line in path.read_text().splitlines():
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn line: dropped with the rewrite
        (moved if is_stale(r) else keep).append(line)
    stale_path = path.parent / STALE_FILE
    fd = os.open(stale_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, ("\n".join(moved) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    tmp = path.with_name(f".{path.name}.rewrite")
    with open(tmp, "w") as f:
        f.write("".join(line + "\n" for line in keep))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    print(f"jaxclp: moved {len(moved)} result(s) of {dataset}/{split} from another configuration to {stale_path}",
          file=sys.stderr)
    return stale


def _repair_tail(path: Path) -> None:
    """Ends a results file that lost its last newline (a torn write) with one, so the next record starts on
    its own line and the torn line stays unreadable (ignored) instead of corrupting the next record."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
    if last != b"\n":
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, b"\n")
        finally:
            os.close(fd)


@contextlib.contextmanager
def folder_lock(out: Path, verbose: bool = True):
    """Holds an exclusive advisory lock on ``out/.lock`` (``fcntl.flock``; released when the process dies).

    A second holder waits (saying so on stderr when ``verbose``). Without ``fcntl`` (Windows) no lock is
    taken.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    fd = os.open(Path(out) / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if verbose:
                print(f"jaxclp: another run holds {Path(out) / LOCK_FILE}; waiting for it to finish",
                      file=sys.stderr)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
