"""Deprecated alias of :mod:`jaxclp.nonlinear` (the nonlinear propagation step of the CLP authors' code).

Kept for one release so that existing code keeps working: importing this module warns with a
``DeprecationWarning``, and its old names (``authors_grid``, ``authors_propagate``, ``AuthorsResult``,
``authors_starts``, ``authors_values``, ``AUTHORS_ALPHAS``) warn too and return the renamed objects of
:mod:`jaxclp.nonlinear` (``nonlinear_grid``, ...), which this module also re-exports. Import
:mod:`jaxclp.nonlinear` instead.
"""

from __future__ import annotations

import warnings

from jaxclp import nonlinear as _nonlinear
from jaxclp.nonlinear import (GRID_CHUNK_BYTES, L1_EPS, NONLINEAR_ALPHAS, NUM_LAYERS, POSTS, STARTS, WEIGHTS,
                              NonlinearResult, Post, Start, Weight, l1_rows, nonlinear_grid, nonlinear_propagate,
                              nonlinear_starts, nonlinear_values)

RENAMED = {"authors_grid": "nonlinear_grid", "authors_propagate": "nonlinear_propagate",
           "AuthorsResult": "NonlinearResult", "authors_starts": "nonlinear_starts",
           "authors_values": "nonlinear_values", "AUTHORS_ALPHAS": "NONLINEAR_ALPHAS"}
"""Old name of this module -> its name in :mod:`jaxclp.nonlinear`."""

__all__ = ["GRID_CHUNK_BYTES", "L1_EPS", "NONLINEAR_ALPHAS", "NUM_LAYERS", "POSTS", "STARTS", "WEIGHTS",
           "NonlinearResult", "Post", "Start", "Weight", "l1_rows", "nonlinear_grid", "nonlinear_propagate",
           "nonlinear_starts", "nonlinear_values"]

warnings.warn("the module jaxclp.authors is deprecated and will be removed in the next release; "
              "use jaxclp.nonlinear", DeprecationWarning, stacklevel=2)


def __getattr__(name: str):
    if name in RENAMED:
        new = RENAMED[name]
        warnings.warn(f"jaxclp.authors.{name} is deprecated and will be removed in the next release; "
                      f"use jaxclp.nonlinear.{new}", DeprecationWarning, stacklevel=2)
        return getattr(_nonlinear, new)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
