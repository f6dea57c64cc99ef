"""The README's library example runs as written (data fetched through the file:// mirror of ../shared)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "datasets"


def readme_block(section: str) -> str:
    text = (REPO / "README.md").read_text()
    body = text.split(f"## {section}\n", 1)[1]
    return re.search(r"```python\n(.*?)```", body, re.S).group(1)


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared datasets not found at {SHARED}")
def test_library_example_runs(tmp_path):
    code = readme_block("Library example") + (
        "\nimport numpy as _np\n"
        "assert 0.3 < float((_np.asarray(model.predict()) == ds.labels)[test].mean()) <= 1.0\n"
        "assert bool(_np.all(_np.asarray(sol.converged))) and sol.value.shape == (ds.num_nodes, ds.num_classes)\n"
        "assert bool(info.converged)\n")
    # a fresh process: the example runs in float32 as a user's would (conftest turns x64 on here)
    env = dict(os.environ, JAXCLP_DATA=str(tmp_path / "data"), JAXCLP_DATA_URL=SHARED.as_uri(),
               JAXCLP_CACHE=str(tmp_path / "parsed"))
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "test acc" in done.stdout and "alpha" in done.stdout
