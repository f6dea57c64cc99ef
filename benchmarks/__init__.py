"""Benchmarks of jaxclp (run ``python -m benchmarks.run --help``).

Modules (each runnable as ``python -m benchmarks.<name>``):

* :mod:`benchmarks.solvers`     -- iterative vs closed-form solvers (time, iterations, agreement, rho).
* :mod:`benchmarks.throughput`  -- one CLP propagation step: jaxclp vs scipy, torch, a C loop, memory bandwidth.
* :mod:`benchmarks.kernels`     -- standalone alternative JAX SpMM formulations (candidates to port).
* :mod:`benchmarks.end_to_end`  -- fit + alpha selection + predict on real datasets vs PyTorch.
* :mod:`benchmarks.scaling`     -- time and peak memory vs number of edges (one subprocess per size).
* :mod:`benchmarks.summary`     -- builds ``results/SUMMARY.md`` from the JSON results.
* :mod:`benchmarks.run`         -- entry point running everything (``main(argv)``).

Results (JSON, markdown, PNG) go to ``benchmarks/results/`` (``--out`` to change).
"""
