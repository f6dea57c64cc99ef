"""MkDocs hook: serves committed files from outside ``docs/`` as pages, unchanged.

``benchmarks/results/*.{md,png}`` (written by ``python -m benchmarks.run``) and ``results/**/*.{md,png}``
(written by ``jaxclp reproduce`` / ``jaxclp summarize`` from the records) appear in the site under the same paths,
so a page links them as ``../benchmarks/results/solvers.md`` or ``../results/table2/summary.md`` and the strict
build checks those links (and theirs) like any other.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File

SERVED = {"benchmarks/results": ("*.md", "*.png"), "results": ("**/*.md", "**/*.png")}


def on_files(files, config):
    root = Path(config["config_file_path"]).parent
    for folder, patterns in SERVED.items():
        for pattern in patterns:
            for path in sorted((root / folder).glob(pattern)):
                uri = path.relative_to(root).as_posix()
                if files.get_file_from_path(uri) is None:
                    files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files
