"""A command's progress: the job and its ETA, the progress bar and its status line, the folder an interrupt
reports, and the compiled programs' memory.

:func:`jaxclp.experiments.runner.run` reports here: within :func:`job` its calls are units of one :class:`Job`
(the bar says ``dataset 4/14 actor`` and shows the job's ETA from its splits' own times); :class:`_StatusLine`
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


ETA_SINGLE_SPLITS = 2
"""A job's ETA is a range until this many splits of one (dataset, split kind) are done, then a single value: the
first split of a graph compiles its programs (seconds to minutes), so it bounds a later split's time from above only,
and the compilation seconds JAX reports bound it from below (the record rate of the first split misled 2-6x)."""

COMPILE_EVENTS = ("/jax/core/compile/backend_compile_duration", "/jax/core/compile/jaxpr_trace_duration",
                  "/jax/core/compile/jaxpr_to_mlir_module_duration")
"""JAX's monitoring events whose seconds count as compilation (tracing, lowering, XLA's compile)."""

_COMPILED = [0.0]
"""Seconds of compilation of this process so far (:data:`COMPILE_EVENTS`, summed by :func:`_listen_to_compiles`)."""
_LISTENING = [False]


def _listen_to_compiles() -> None:
    """Registers (once per process) the listener that sums the seconds of :data:`COMPILE_EVENTS`."""
    if _LISTENING[0]:
        return
    _LISTENING[0] = True

    def listen(event: str, seconds: float, **kwargs) -> None:
        if event in COMPILE_EVENTS:
            _COMPILED[0] += float(seconds)

    try:
        jax.monitoring.register_event_duration_secs_listener(listen)
    except Exception:  # noqa: BLE001 - no listener: the ETA's range is then wider (compilation not apart)
        pass


def compiled_seconds() -> float:
    """Seconds this process has spent compiling JAX programs since the first :func:`job` (tracing, lowering,
    XLA)."""
    return _COMPILED[0]


def _duration(seconds: float) -> str:
    """``"45s"``, ``"3m12s"``, ``"2h05m"``."""
    s = int(round(max(float(seconds), 0.0)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def eta_words(low: float, high: float) -> str:
    """An ETA as a person reads it, rounded: ``about 40 s left``, ``about 1-3 min left``, ``about 2 min left``,
    ``about 1.5-2 h left``; one value where the rounded bounds agree."""
    low, high = max(float(low), 0.0), max(float(high), float(low), 0.0)
    if high < 90:
        unit, f = "s", lambda x: max(10, int(round(x / 10.0)) * 10)
    elif high < 90 * 60:
        unit, f = "min", lambda x: max(1, int(round(x / 60.0)))
    else:
        unit, f = "h", lambda x: max(0.5, round(x / 1800.0) / 2)
    lo, hi = f(low), f(high)
    shown = (lambda v: f"{v:g}")
    return f"about {shown(hi)} {unit} left" if lo >= hi else f"about {shown(lo)}-{shown(hi)} {unit} left"


class Job:
    """What one command runs in all: ``total`` (dataset, split kind) units of :func:`~jaxclp.experiments.runner.run`,
    each of ``records_per_unit`` records (runs x methods) at most. :func:`~jaxclp.experiments.runner.run` calls
    :meth:`begin` per unit, :meth:`split_start` and :meth:`split_end` around each split it computes and
    :meth:`record` per computed record.

    :meth:`eta` is measured in splits: a unit's first split compiles its programs, so until
    :data:`ETA_SINGLE_SPLITS` splits of a unit are done a later split costs between the first split's seconds less
    its compilation (:func:`compiled_seconds`) and the first split's seconds: a range; then the later splits'
    median: one value. A later unit costs its setup (the MLP priors, what came before its first split), a first
    split (the first splits' mean) and its other splits. ``clock``: seconds now (tests give a fake one)."""

    def __init__(self, total: int = 1, records_per_unit: int | None = None, clock=time.perf_counter,
                 compiled=compiled_seconds):
        self.total, self.records_per_unit = int(total), records_per_unit
        self.index, self.left_in_unit, self.seconds = 0, 0, []
        self._clock, self._compiled = clock, compiled
        self.splits_left = 0
        self.splits_per_unit: int | None = None
        self.first: list[tuple[float, float]] = []
        """``(seconds, compilation seconds)`` of each unit's first split."""
        self.later: list[float] = []
        """Seconds of the other splits (every unit's)."""
        self.setups: list[float] = []
        """Seconds from each unit's :meth:`begin` to its first split (the MLP priors)."""
        self._begun: float | None = None
        self._split: tuple[float, float] | None = None
        self._first_of_unit = True

    def begin(self, dataset: str, split: str, computing: int, splits: int | None = None,
              methods: int | None = None) -> None:
        """A unit begins: ``computing`` records to compute, in ``splits`` splits of ``methods`` methods."""
        self.index += 1
        self.left_in_unit = int(computing)
        self.splits_left = int(splits) if splits is not None else 0
        if methods and self.records_per_unit:
            self.splits_per_unit = max(int(self.records_per_unit) // int(methods), 1)
        self._begun, self._split, self._first_of_unit = self._clock(), None, True

    def split_start(self) -> None:
        now = self._clock()
        if self._first_of_unit and self._begun is not None:
            self.setups.append(now - self._begun)
        self._split = (now, self._compiled())

    def split_end(self) -> None:
        if self._split is None:
            return
        t0, c0 = self._split
        seconds, compiling = self._clock() - t0, self._compiled() - c0
        if self._first_of_unit:
            self.first.append((seconds, min(max(compiling, 0.0), seconds)))
        else:
            self.later.append(seconds)
        self._first_of_unit, self._split = False, None
        self.splits_left = max(self.splits_left - 1, 0)

    def record(self, seconds: float) -> None:
        self.seconds.append(float(seconds))
        self.left_in_unit = max(self.left_in_unit - 1, 0)

    def eta(self) -> tuple[float, float] | None:
        """``(low, high)`` seconds left (equal once :data:`ETA_SINGLE_SPLITS` splits of a unit are done); None before
        a first split is done."""
        if not self.first:
            return None
        if self.later:
            low = high = float(np.median(self.later))
        else:  # a later split: no compilation, at most the first split's time
            low = float(np.mean([s - c for s, c in self.first]))
            high = float(np.mean([s for s, _ in self.first]))
        in_split = 0.0 if self._split is None else self._clock() - self._split[0]
        now = self.splits_left
        first_now = self._split is not None and self._first_of_unit
        if first_now:  # the unit's first split runs now: it costs what a first split costs
            first = float(np.mean([s for s, _ in self.first]))
            cur = (max(first - in_split, 0.0), max(first - in_split, 0.0))
            now -= 1
        elif self._split is not None:
            cur = (max(low - in_split, 0.0), max(high - in_split, 0.0))
            now -= 1
        else:
            cur = (0.0, 0.0)
        units_after = max(self.total - self.index, 0)
        per_unit = self.splits_per_unit or 0
        first = float(np.mean([s for s, _ in self.first]))
        setup = float(np.mean(self.setups)) if self.setups else 0.0
        after = units_after * (setup + first) if per_unit else 0.0
        later_splits = max(now, 0) + units_after * max(per_unit - 1, 0)
        return (cur[0] + after + later_splits * low, cur[1] + after + later_splits * high)

    def eta_text(self) -> str | None:
        """:meth:`eta` in words (:func:`eta_words`), None without one."""
        eta = self.eta()
        return None if eta is None or eta[1] <= 0 else eta_words(*eta)


_JOB: contextvars.ContextVar = contextvars.ContextVar("jaxclp_job", default=None)


@contextlib.contextmanager
def job(total: int, records_per_unit: int | None = None):
    """Within the block, :func:`~jaxclp.experiments.runner.run` calls are units of one :class:`Job` of ``total``
    (dataset, split kind) units (the progress bar says ``dataset 4/14 actor`` and shows the job's ETA). Yields the
    :class:`Job`."""
    _listen_to_compiles()
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
    method clp: base predictor gcn_tuned; about 10-12 min left``); :meth:`at` sets its first part. A no-op without a
    bar (``progress=False``)."""

    def __init__(self, bar, tracker: "Job | None" = None):
        self._set = getattr(bar, "set_postfix_str", None)
        self._where = ""
        self._tracker = tracker

    def __call__(self, text: str = "") -> None:
        if self._set is not None:
            eta = self._tracker.eta_text() if self._tracker is not None else None
            self._set(self._where + (f": {text}" if text else "") + (f"; {eta}" if eta else ""), refresh=True)

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
