"""Builds and loads the C reference kernels (``benchmarks/c/clp_ref.c``) with gcc at benchmark time."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np

SRC = Path(__file__).resolve().parent / "c" / "clp_ref.c"
FLAGS = ["-O3", "-march=native", "-fopenmp", "-shared", "-fPIC"]


class CRef:
    """ctypes wrapper of the compiled kernels (all arrays C-contiguous float32 / int32 / int64)."""

    def __init__(self, lib_path: Path, command: str):
        self.lib = ctypes.CDLL(str(lib_path))
        self.command = command
        p = ctypes.c_void_p
        i64 = ctypes.c_int64
        self.lib.clp_factored.argtypes = [i64, i64, p, p, p, p, p, p, p, p, ctypes.c_int]
        self.lib.clp_edgewise.argtypes = [i64, i64, p, p, p, p, p, ctypes.c_int]
        self.lib.triad.argtypes = [i64, p, p, p, ctypes.c_float, ctypes.c_int]

    @staticmethod
    def _ptr(a: np.ndarray):
        return a.ctypes.data

    def factored(self, indptr, col, val, left, right, x, tmp, out, threads: int) -> np.ndarray:
        n, k = x.shape
        self.lib.clp_factored(n, k, self._ptr(indptr), self._ptr(col), self._ptr(val), self._ptr(left),
                              self._ptr(right), self._ptr(x), self._ptr(tmp), self._ptr(out), threads)
        return out

    def edgewise(self, indptr, col, emat, x, out, threads: int) -> np.ndarray:
        n, k = x.shape
        self.lib.clp_edgewise(n, k, self._ptr(indptr), self._ptr(col), self._ptr(emat), self._ptr(x),
                              self._ptr(out), threads)
        return out

    def triad(self, a, b, c, s: float, threads: int) -> np.ndarray:
        self.lib.triad(a.shape[0], self._ptr(a), self._ptr(b), self._ptr(c), float(s), threads)
        return a


def build(build_dir: Path) -> tuple[CRef | None, str]:
    """Compiles the kernels into ``build_dir``. Returns ``(CRef or None, message)``."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        return None, "no C compiler (gcc) found"
    build_dir.mkdir(parents=True, exist_ok=True)
    out = build_dir / "libclp_ref.so"
    cmd = [gcc, *FLAGS, str(SRC), "-o", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, f"gcc failed: {r.stderr[-500:]}"
    version = subprocess.run([gcc, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    return CRef(out, " ".join([Path(gcc).name, *FLAGS, SRC.name])), version
