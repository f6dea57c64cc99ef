"""Benchmarks of jaxclp (run ``python -m jaxclp.benchmarks.run --help``).

Modules (each runnable as ``python -m jaxclp.benchmarks.<name>``):

* :mod:`jaxclp.benchmarks.solvers`     -- iterative vs closed-form solvers (time, iterations, agreement, rho).
* :mod:`jaxclp.benchmarks.throughput`  -- one CLP propagation step: jaxclp vs scipy, torch, a C loop, memory bandwidth.
* :mod:`jaxclp.benchmarks.kernels`     -- standalone alternative JAX SpMM formulations (candidates to port).
* :mod:`jaxclp.benchmarks.end_to_end`  -- fit + alpha selection + predict on real datasets vs PyTorch.
* :mod:`jaxclp.benchmarks.scaling`     -- time and peak memory vs number of edges (one subprocess per size).
* :mod:`jaxclp.benchmarks.graph_memory` -- peak RSS per edge and time of graph construction + compat + solve.
* :mod:`jaxclp.benchmarks.halo`        -- halo sizes of the node-sharded graph per partitioner (jaxclp.shard).
* :mod:`jaxclp.benchmarks.sharded`     -- a products-shaped graph through the sharded pipeline on 1/2/4/8 host devices.
* :mod:`jaxclp.benchmarks.summary`     -- builds ``results/SUMMARY.md`` from the JSON results.
* :mod:`jaxclp.benchmarks.run`         -- entry point running everything (``main(argv)``).

Results (JSON, markdown, PNG) go to ``benchmarks/results/`` (``--out`` to change).
"""
