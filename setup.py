"""Optional C++ extension ``jaxclp._kernels``: the fused CSR kernels called through the XLA FFI.

Everything else is configured in pyproject.toml. The extension is optional: when no C++ compiler or no XLA FFI
headers (vendored in csrc/third_party from jaxlib) are available, the build prints a warning and the install
succeeds without it; jaxclp then uses XLA's sparse path (see ``jaxclp.sparse``). ``JAXCLP_NO_FFI=1`` skips the
build. Flags are portable (plain -O3, no -march=native), so a built wheel runs on any x86-64 / aarch64 CPU.
"""

import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def _ffi_include_dir():
    """The XLA FFI headers: the copy in ``csrc/third_party`` (jaxlib 0.10.2's, see its README), else jaxlib's own
    (what ``jax.ffi.include_dir()`` returns), found without importing jax."""
    inc = Path(__file__).resolve().parent / "csrc" / "third_party"
    if (inc / "xla" / "ffi" / "api" / "ffi.h").exists():
        return str(inc)
    try:
        import jaxlib
    except ImportError:
        return None
    inc = Path(jaxlib.__file__).resolve().parent / "include"
    return str(inc) if (inc / "xla" / "ffi" / "api" / "ffi.h").exists() else None


class OptionalBuildExt(build_ext):
    """Builds the extension if it can; otherwise warns and lets the install succeed."""

    def _skip(self, why):
        msg = (f"WARNING: jaxclp's optional C++ kernel was not built ({why}); jaxclp will use XLA's "
               f"(slower) sparse path on CPU.")
        print(msg, file=sys.stderr)

    def run(self):
        if os.environ.get("JAXCLP_NO_FFI", "").strip().lower() not in ("", "0", "false", "no"):
            self._skip("JAXCLP_NO_FFI is set")
            return
        inc = _ffi_include_dir()
        if inc is None:
            self._skip("the XLA FFI headers are missing (csrc/third_party, or jaxlib at build time)")
            return
        for ext in self.extensions:
            ext.include_dirs.append(inc)
        try:
            super().run()
        except Exception as e:  # no compiler, compile error: never fail the install
            self._skip(f"{type(e).__name__}: {e}")

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as e:
            self._skip(f"{type(e).__name__}: {e}")


setup(
    ext_modules=[
        Extension(
            "jaxclp._kernels",
            sources=["csrc/jaxclp_kernels.cc"],
            language="c++",
            extra_compile_args=["-O3", "-g0", "-std=c++17", "-fvisibility=hidden", "-Wno-return-type"],
            optional=True,
        )
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)
