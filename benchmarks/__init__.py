"""Benchmarks of jaxclp (run ``python -m benchmarks.run --help`` from the root of a clone).

Not part of the installed package: this is the top-level package ``benchmarks`` of a clone. It imports
:mod:`jaxclp`; nothing in :mod:`jaxclp` imports it.

Modules (each runnable as ``python -m benchmarks.<name>``):

* :mod:`benchmarks.solvers`     -- iterative vs closed-form solvers (time, iterations, agreement, rho).
* :mod:`benchmarks.throughput`  -- one CLP propagation step: jaxclp vs scipy, torch, a C loop, memory bandwidth.
* :mod:`benchmarks.kernels`     -- standalone alternative JAX SpMM formulations (candidates to port).
* :mod:`benchmarks.end_to_end`  -- fit + alpha selection + predict on real datasets vs PyTorch.
* :mod:`benchmarks.scaling`     -- time and peak memory vs number of edges (one subprocess per size).
* :mod:`benchmarks.graph_memory` -- peak RSS per edge and time of graph construction + compat + solve.
* :mod:`benchmarks.halo`        -- halo sizes of the node-sharded graph per partitioner (jaxclp.sharded_graph).
* :mod:`benchmarks.sharded`     -- a products-shaped graph through the sharded pipeline on 1/2/4/8 host devices.
* :mod:`benchmarks.summary`     -- builds ``results/SUMMARY.md`` from the JSON results.
* :mod:`benchmarks.run`         -- entry point running everything (``main(argv)``).

Results (JSON, markdown, PNG) go to ``benchmarks/results/`` (``--out`` to change).
"""
