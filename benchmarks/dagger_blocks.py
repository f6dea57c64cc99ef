"""Computes the † blocks (spectral + diffusion columns, :func:`jaxclp.experiments.analyses.dagger.dagger_blocks`)
of the named datasets into a cache folder, with the recipe ``jaxclp reproduce table_homophily`` uses
(``FULL_DAGGER``), and prints each entry, its key and the seconds it took:

    python -m benchmarks.dagger_blocks --cache .devdata/cache coauthor-cs coauthor-physics

Why: the blocks come from the host's scipy, whose bits differ between machines, and a derived dataset is
identified by its arrays. Computed here and carried to a lent GPU machine (``run``'s carry ``[".devdata"]``;
``benchmarks/device_reproduce.sh`` points ``JAXCLP_CACHE`` at ``.devdata/cache``), the device's † records have the
same data hash as this machine's, so CPU- and GPU-made splits of one † dataset resume and summarise together.
Data from ``$JAXCLP_DATA_URL`` as for every loader.
"""

from __future__ import annotations

import argparse
import time

from jaxclp.datasets import load
from jaxclp.experiments.analyses import dagger as D


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("datasets", nargs="+")
    ap.add_argument("--cache", default=True, help="cache folder (default: $JAXCLP_CACHE or the user cache)")
    args = ap.parse_args(argv)
    for name in args.datasets:
        ds = load(name)
        t0 = time.perf_counter()
        _, info = D.dagger_dataset(ds, D.FULL_DAGGER, cache=args.cache)
        print(f"{name}+dagger: key {D.blocks_key(ds, D.FULL_DAGGER)}, dim {info['dagger_dim']}, block scale "
              f"{info['block_scale']:.4f}, {'cached' if info['from_cache'] else 'computed'} in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
