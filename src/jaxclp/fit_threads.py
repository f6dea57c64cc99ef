"""Independent fits run side by side on the CPU's cores: the one rule for how many, and the helper that runs them.

XLA:CPU runs one program at a time per calling thread, and a small graph's training program does not fill two
cores on its own: its products (n x 64 by 64 x 64) are too small to split. Independent fits (the specs of a tuned
GNN grid, the base predictors of a split) called from separate host threads run at the same time, each program
the same computation as alone, so every result is bit for bit the sequential one. Measured on 2 cores (the tuned
GCN and SAGE grids of one split, ``benchmarks/results/fit_threads.md``): 2.0-2.2x faster on a 300-node graph,
1.8-1.9x on 900 nodes, 1.3x on 2200, 1.1x on 6000, where one program's own threads already keep both cores busy.

Only on the CPU (an accelerator queues the programs on one device), only for graphs up to :data:`MAX_NODES` (each
fit side by side holds its own training state), and only where a new thread sees this thread's JAX settings: a
context manager such as ``jax.enable_x64(True)`` or ``jax.default_device(...)`` sets them for its own thread, so
under one the fits run in order. A fit already running in a worker of :func:`run_each` runs its own independent
parts in order (no threads inside threads). The workers see the caller's context variables (the runner's status
line).
"""

from __future__ import annotations

import contextvars
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence

import jax

try:  # the settings JAX's context managers keep per thread (x64, default device, precision, ...)
    from jax._src.config import trace_context as _trace_context
except ImportError:  # pragma: no cover - a JAX without it: fits run in order
    _trace_context = None

MAX_NODES = 16384
"""The largest graph (nodes, as the caller counts them: the grid its padded graph's) whose fits run side by side: the gain falls with size (1.8x at
900 nodes, 1.1x at 6000 on 2 cores) while the memory of the fits held at once grows with it."""

MAX_THREADS = 4
"""At most this many fits at once (measured on 2 cores only; more cores than this are left to each program)."""

_inside = threading.local()


def cores() -> int:
    """The CPU cores this process may use (its affinity where the system says, else ``os.cpu_count()``)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def _settings_shared() -> bool:
    """Whether a new thread traces with this thread's JAX settings (x64, default device, matmul precision, ...:
    JAX's trace context, which its context managers set per thread). False where this JAX does not say."""
    if _trace_context is None:
        return False
    seen = []
    worker = threading.Thread(target=lambda: seen.append(_trace_context()))
    worker.start()
    worker.join()
    return seen == [_trace_context()]


def fit_threads(num_nodes: int) -> int:
    """How many independent fits on a graph of ``num_nodes`` nodes run at once: ``min(cores, MAX_THREADS)`` on the
    CPU backend up to :data:`MAX_NODES` nodes; 1 on an accelerator, on larger graphs, on one core, inside a
    worker of :func:`run_each`, and under a JAX context manager that a new thread would not see."""
    if getattr(_inside, "worker", False) or jax.default_backend() != "cpu" or int(num_nodes) > MAX_NODES:
        return 1
    threads = max(1, min(cores(), MAX_THREADS))
    return threads if threads == 1 or _settings_shared() else 1


def _in_worker(call: Callable):
    _inside.worker = True
    try:
        return jax.block_until_ready(call())
    finally:
        _inside.worker = False


def run_each(calls: Sequence[Callable], threads: int) -> list:
    """``[call() for call in calls]``, with up to ``threads`` of them running at once (each waits for its arrays).

    Args:
        calls: independent zero-argument callables (no call reads what another writes).
        threads: :func:`fit_threads`' answer; 1 (or a single call) runs them in order in this thread.

    Returns:
        their results, in the order of ``calls``; the first exception raised (in that order) is raised here,
        and the calls not started yet are dropped.
    """
    calls = list(calls)
    if threads <= 1 or len(calls) <= 1:
        return [call() for call in calls]
    pool = ThreadPoolExecutor(min(threads, len(calls)), thread_name_prefix="jaxclp-fit")
    try:
        futures = [pool.submit(contextvars.copy_context().run, _in_worker, call) for call in calls]
        return [f.result() for f in futures]
    finally:  # Ctrl-C or an error: the calls not started are dropped, the running ones end on their own
        pool.shutdown(wait=False, cancel_futures=True)
