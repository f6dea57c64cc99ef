"""Locating, downloading and verifying the published data files.

Root directory: the ``root`` argument, else ``$JAXCLP_DATA``, else the user cache directory
(``$XDG_CACHE_HOME/jaxclp``, default ``~/.cache/jaxclp``; ``~/Library/Caches/jaxclp`` on macOS,
``%LOCALAPPDATA%\\jaxclp`` on Windows). The root has the layout of the registry's relative paths.

Download source: each file's canonical URL, or ``<base_url>/<relative path>`` when ``base_url`` (argument) or
``$JAXCLP_DATA_URL`` is set (e.g. ``file:///path/to/a/mirror``). Downloads are written to a temporary file in
the target directory, sha256-verified, and only then renamed into place; a file that fails verification is
never moved into place (nor used).
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import urllib.error
import urllib.request
import warnings
from pathlib import Path

from jaxclp.datasets.registry import DatasetSpec, FileSpec, get_spec

__all__ = ["ChecksumError", "DownloadError", "data_root", "default_base_url", "file_url", "sha256sum",
           "verify_file", "fetch_file", "fetch"]

ENV_ROOT = "JAXCLP_DATA"
ENV_CACHE = "JAXCLP_CACHE"
ENV_URL = "JAXCLP_DATA_URL"
_CHUNK = 1 << 20


class ChecksumError(ValueError):
    """A file's sha256 differs from the registry (corrupted, truncated or a different version)."""


class DownloadError(OSError):
    """A file could not be downloaded."""


def data_root(root=None) -> Path:
    """Resolves the data root directory (not created).

    Args:
        root: explicit directory, or None for ``$JAXCLP_DATA`` / the user cache directory.
    """
    if root is not None:
        return Path(root).expanduser()
    env = os.environ.get(ENV_ROOT)
    if env:
        return Path(env).expanduser()
    return user_cache_dir()


def processed_dir(cache=True) -> Path:
    """Where the parsed-dataset cache lives: never next to the raw files unless asked.

    Args:
        cache: a directory (used as given), or True for ``$JAXCLP_CACHE`` / ``<user cache dir>/_processed``.
    """
    if cache is not True and cache is not None:
        return Path(cache).expanduser()
    env = os.environ.get(ENV_CACHE)
    return Path(env).expanduser() if env else user_cache_dir() / "_processed"


def user_cache_dir() -> Path:
    """``~/.cache/jaxclp`` (``$XDG_CACHE_HOME``; ``~/Library/Caches`` on macOS, ``%LOCALAPPDATA%`` on Windows)."""
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    elif os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA") or (Path.home() / "AppData" / "Local"))
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or (Path.home() / ".cache"))
    return base / "jaxclp"


def default_base_url(base_url=None) -> str | None:
    """The mirror base URL: ``base_url`` if given, else ``$JAXCLP_DATA_URL``, else None (canonical URLs).

    A local directory path is accepted and turned into a ``file://`` URL.
    """
    b = base_url if base_url is not None else os.environ.get(ENV_URL) or None
    if b is None:
        return None
    b = str(b)
    if "://" not in b:
        b = Path(b).expanduser().resolve().as_uri()
    return b.rstrip("/")


def file_url(spec: FileSpec, base_url=None) -> str:
    """URL to download ``spec`` from: ``<base>/<relative path>`` with a mirror, else the canonical URL."""
    base = default_base_url(base_url)
    return spec.url if base is None else f"{base}/{spec.path}"


def sha256sum(path) -> str:
    """sha256 hex digest of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def _mismatch(path, expected, actual, extra="") -> ChecksumError:
    return ChecksumError(f"sha256 mismatch for {path}: expected {expected}, got {actual}. The file is corrupted, "
                         f"truncated or not the published version{extra}.")


def verify_file(path, spec: FileSpec) -> None:
    """Checks a file against the registry hash (no-op when the hash is unknown).

    Raises:
        ChecksumError: hash mismatch (message names the file, the expected and the actual hash).
    """
    if spec.sha256 is None:
        return
    actual = sha256sum(path)
    if actual != spec.sha256:
        raise _mismatch(path, spec.sha256, actual, "; it was not used. Delete it (it is re-downloaded on the "
                                                    "next load with download=True) or replace it with the "
                                                    f"file from {spec.url}")


def _looks_like_lfs_pointer(path) -> bool:
    with open(path, "rb") as f:
        return f.read(64).startswith(b"version https://git-lfs")


def _download(url: str, target: Path, spec: FileSpec, timeout: float) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    try:
        h = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(url, timeout=timeout) as resp:
                    for chunk in iter(lambda: resp.read(_CHUNK), b""):
                        h.update(chunk)
                        out.write(chunk)
            except (urllib.error.URLError, OSError, ValueError) as err:
                root = target.parents[len(Path(spec.path).parts) - 1]
                why = ("Is the mirror's folder right (it needs the registry's layout)?" if url.startswith("file:")
                       else "Offline or behind a firewall?")
                raise DownloadError(f"could not download {url} -> {target}: {_reason(err)}. {why} "
                                    f"Put the file at {target} (the data folder is {root}; "
                                    f"${ENV_ROOT} or root= choose another), or set ${ENV_URL} to a mirror with "
                                    f"the same layout (a folder or URL, e.g. {ENV_URL}=file:///path/to/datasets)"
                                    ) from err
        actual = h.hexdigest()
        if spec.sha256 is not None and actual != spec.sha256:
            raise _mismatch(url, spec.sha256, actual, f"; the download was discarded and {target} not written")
        if spec.sha256 is None:
            if os.path.getsize(tmp) == 0 or _looks_like_lfs_pointer(tmp):
                raise DownloadError(f"{url} returned an empty file or a Git-LFS pointer, not the data")
            warnings.warn(f"{spec.path}: no sha256 known, the download from {url} could not be verified "
                          f"(sha256 {actual})", stacklevel=3)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _reason(err: BaseException) -> str:
    """The cause of a failed download in a few words (urllib's ``<urlopen error [Errno -3] Temporary failure in
    name resolution>`` as ``Temporary failure in name resolution``)."""
    reason = getattr(err, "reason", None)
    text = str(getattr(reason, "strerror", None) or reason or err)
    return text or type(err).__name__


def fetch_file(spec: FileSpec, root=None, *, download: bool = True, base_url=None, timeout: float = 60.0) -> Path:
    """Returns the local path of a registered file, downloading and verifying it if needed.

    Args:
        spec: the file.
        root: data root (see :func:`data_root`).
        download: fetch a missing file (else raise FileNotFoundError).
        base_url: mirror base URL (see :func:`file_url`).
        timeout: network timeout in seconds.

    Raises:
        FileNotFoundError: missing and ``download=False``.
        ChecksumError: the existing or downloaded file fails verification.
        DownloadError: the download failed.
    """
    target = data_root(root) / spec.path
    if not target.exists():
        if not download:
            raise FileNotFoundError(f"{target} is missing (download=False). Put the file there "
                                    f"(from {spec.url}) or call with download=True.")
        _download(file_url(spec, base_url), target, spec, timeout)
    verify_file(target, spec)
    return target


def fetch(name_or_spec, root=None, *, download: bool = True, base_url=None, include_optional: bool = False,
          timeout: float = 60.0) -> dict[str, Path | None]:
    """Ensures all files of a dataset are present and verified.

    Args:
        name_or_spec: dataset name or :class:`DatasetSpec`.
        root: data root.
        download: fetch missing files.
        base_url: mirror base URL.
        include_optional: also download files marked optional; by default an optional
            file is used only when already present.
        timeout: network timeout in seconds.

    Returns:
        dict role -> local path (None for an absent optional file).

    Raises:
        FileNotFoundError: with ``download=False``, lists every missing file with where to put it.
        ChecksumError, DownloadError: see :func:`fetch_file`.
    """
    spec = name_or_spec if isinstance(name_or_spec, DatasetSpec) else get_spec(name_or_spec)
    rootp = data_root(root)
    missing = [fs for fs in spec.files.values()
               if not fs.optional and not (rootp / fs.path).exists()]
    if missing and not download:
        lines = "\n".join(f"  {rootp / fs.path}  (from {fs.url})" for fs in missing)
        raise FileNotFoundError(f"dataset {spec.name!r}: {len(missing)} file(s) missing under {rootp} and "
                                f"download=False. Put them at:\n{lines}\nor load with download=True "
                                f"(set ${ENV_ROOT} or root= to use another directory).")
    paths: dict[str, Path | None] = {}
    for role, fs in spec.files.items():
        if fs.optional and not include_optional and not (rootp / fs.path).exists():
            paths[role] = None
            continue
        paths[role] = fetch_file(fs, root, download=download, base_url=base_url, timeout=timeout)
    return paths
