"""A command's progress: the job and its ETA, the progress bar and its status line, the folder an interrupt
reports, and the compiled programs' memory.

:func:`jaxclp.experiments.runner.run` reports here: within :func:`job` its calls are units of one :class:`Job`
(the bar says ``dataset 4/14 actor`` and shows the job's ETA from its records' own times); :class:`_StatusLine`
writes what a method computes now beside the bar (:func:`jaxclp.experiments.candidates.status`);
:func:`active_output` and :func:`summary_target` tell the CLI's interrupt handler where the kept records are and how
to title their summary; :func:`release_compiled` drops JAX's compiled executables before the process runs out of
memory mappings.
"""

from __future__ import annotations

import contextlib
import contextvars
import gc
import sys
import time
from pathlib import Path

import jax
import numpy as np


ETA_MIN_RECORDS = 3
"""A job's ETA is shown once this many records of it have been computed (before, one record's time says little:
early rates misled by a factor of six)."""


def _duration(seconds: float) -> str:
    """``"45s"``, ``"3m12s"``, ``"2h05m"``."""
    s = int(round(max(float(seconds), 0.0)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


class Job:
    """What one command runs in all: ``total`` (dataset, split kind) units of :func:`~jaxclp.experiments.runner.run`,
    each of ``records_per_unit`` records (runs x methods) at most. :func:`~jaxclp.experiments.runner.run` calls
    :meth:`begin` per unit and :meth:`record` per computed record; :meth:`eta` is the mean compute time of the records
    computed so far times the records still to compute (the current unit's, exactly; each later unit's, at most
    ``records_per_unit``), None before :data:`ETA_MIN_RECORDS` records (tqdm's early rate misled)."""

    def __init__(self, total: int = 1, records_per_unit: int | None = None):
        self.total, self.records_per_unit = int(total), records_per_unit
        self.index, self.left_in_unit, self.seconds = 0, 0, []

    def begin(self, dataset: str, split: str, computing: int) -> None:
        self.index += 1
        self.left_in_unit = int(computing)

    def record(self, seconds: float) -> None:
        self.seconds.append(float(seconds))
        self.left_in_unit = max(self.left_in_unit - 1, 0)

    def eta(self) -> float | None:
        if len(self.seconds) < ETA_MIN_RECORDS:
            return None
        later = max(self.total - self.index, 0) * (self.records_per_unit or 0)
        return float(np.mean(self.seconds)) * (self.left_in_unit + later)


_JOB: contextvars.ContextVar = contextvars.ContextVar("jaxclp_job", default=None)


@contextlib.contextmanager
def job(total: int, records_per_unit: int | None = None):
    """Within the block, :func:`~jaxclp.experiments.runner.run` calls are units of one :class:`Job` of ``total``
    (dataset, split kind) units (the progress bar says ``dataset 4/14 actor`` and shows the job's ETA). Yields the
    :class:`Job`."""
    tracker = Job(total, records_per_unit)
    token = _JOB.set(tracker)
    try:
        yield tracker
    finally:
        _JOB.reset(token)


_ACTIVE: dict = {"out": None, "summary": {}}
"""The folder :func:`~jaxclp.experiments.runner.run` writes now and how its summary is titled: read by the CLI's
interrupt handler (on its own thread, hence a plain module dict and not a context variable) to say where the kept
records are and write their summary."""


def _note_active(out: Path) -> None:
    if _ACTIVE["out"] is None or Path(_ACTIVE["out"]).resolve() != Path(out).resolve():
        _ACTIVE.update(out=Path(out), summary={})


@contextlib.contextmanager
def summary_target(out, **summary_kwargs):
    """Within the block, an interrupted command's summary of ``out`` is written with ``summary_kwargs``
    (:func:`jaxclp.experiments.summary.write_summary`'s title, methods, ...)."""
    previous = dict(_ACTIVE)
    _ACTIVE.update(out=Path(out), summary=dict(summary_kwargs))
    try:
        yield
    finally:
        _ACTIVE.clear()
        _ACTIVE.update(previous)


def active_output() -> tuple[Path | None, dict]:
    """``(folder, summary options)`` of the :func:`~jaxclp.experiments.runner.run` in progress or last begun (None: none
    yet)."""
    return _ACTIVE["out"], dict(_ACTIVE["summary"])


BAR_FORMAT = "{desc}: {n_fmt}/{total_fmt} splits |{bar:12}| {elapsed}{postfix}"
"""The progress bar without tqdm's rate and remaining-time guess (from the first split's rate: it showed 31 min
left on a graph that finished in under 5); the job's ETA from its records' own times is in the postfix."""
TICK_SECONDS = 1.0
"""How often a running bar redraws (its clock moves between updates; tqdm redraws only on an update)."""


def _progress(items, enabled: bool, desc: str):
    if not enabled:
        return items
    from tqdm.auto import tqdm

    bar = tqdm(items, desc=desc, leave=False, bar_format=BAR_FORMAT)
    if getattr(sys.stderr, "isatty", lambda: False)():  # a log file gets no line per second
        _tick(bar)
    return bar


def _tick(bar) -> None:
    """Redraws ``bar`` every :data:`TICK_SECONDS` until it closes (a daemon thread; tqdm's lock serializes the
    redraws with the main thread's updates)."""
    import threading

    def loop():
        while not getattr(bar, "disable", True) and getattr(bar, "n", 0) < (bar.total or 0):
            time.sleep(TICK_SECONDS)
            try:
                if getattr(bar, "disable", True):
                    return
                bar.refresh()
            except Exception:  # noqa: BLE001 - a closed bar: nothing to redraw
                return

    threading.Thread(target=loop, name="jaxclp-progress", daemon=True).start()


class _StatusLine:
    """A :func:`jaxclp.experiments.candidates.status` callback that writes the progress bar's postfix (``split 3/10,
    method clp: base predictor gcn_tuned; job ETA ~12 min``); :meth:`at` sets its first part. A no-op without a
    bar (``progress=False``)."""

    def __init__(self, bar, tracker: "Job | None" = None):
        self._set = getattr(bar, "set_postfix_str", None)
        self._where = ""
        self._tracker = tracker

    def __call__(self, text: str = "") -> None:
        if self._set is not None:
            eta = self._tracker.eta() if self._tracker is not None else None
            self._set(self._where + (f": {text}" if text else "") + (f"; job ETA ~{_duration(eta)}" if eta else ""),
                      refresh=True)

    def at(self, where: str) -> None:
        self._where = where
        self()


MAP_FRACTION = 0.5
""":func:`release_compiled` drops the compiled executables once the process holds this fraction of the kernel's
``vm.max_map_count`` memory mappings."""


def memory_maps() -> tuple[int, int] | None:
    """``(mappings this process holds, vm.max_map_count)`` on Linux; None where /proc does not say."""
    try:
        with open("/proc/self/maps", "rb") as f:
            held = sum(1 for _ in f)
        with open("/proc/sys/vm/max_map_count") as f:
            limit = int(f.read())
    except (OSError, ValueError):
        return None
    return held, limit


def release_compiled(fraction: float | None = None) -> bool:
    """Drops JAX's in-memory compiled executables (``jax.clear_caches``) when the process holds more than
    ``fraction`` (default :data:`MAP_FRACTION`) of the kernel's memory-mapping limit; returns whether it did.

    Every XLA:CPU executable keeps its machine code in LLVM memory mappings. A process that compiles thousands of
    them (``table_gnn``: ~45 GNN configurations per graph, ~10k mappings for each small graph) reaches
    ``vm.max_map_count`` (65530 by default) after a few graphs and dies inside LLVM ("Cannot allocate memory",
    then SIGSEGV: measured on table_gnn's third graph). Checked after every method of every split; below the
    threshold nothing is dropped (tests and short runs keep their executables), above it the next computations
    recompile (the CLI's persistent compilation cache serves them from disk).
    """
    maps = memory_maps()
    if maps is None or maps[0] <= (MAP_FRACTION if fraction is None else fraction) * maps[1]:
        return False
    jax.clear_caches()
    gc.collect()
    return True
