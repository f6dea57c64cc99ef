"""benchmarks.xla_flags: it reads clp's choices from a run's records and reports each variant against the default's
seconds and choices (hand-made rows; the real runs are the benchmark's, minutes each)."""

from __future__ import annotations

import json

from benchmarks import _common as C, xla_flags as xf


def _row(variant, wall, compile_s, tests):
    return dict(variant=variant, flags=xf.VARIANTS[variant], wall=wall, compile_s=compile_s, backend_s=compile_s - 2,
                trace_s=1.5, lower_s=0.5, programs_loaded=23, programs=[["jit(a)", 2, 9.0], ["jit(b)", 3, 4.0]],
                clp=[dict(run=i, prior="mlp", alpha=0.5, test=t, val=0.5) for i, t in enumerate(tests)])


def test_records_and_report(tmp_path):
    results = tmp_path / "results.jsonl"
    lines = [dict(type="header"), dict(type="result", method="lp", run=0, test=0.1, val=0.2, params={}),
             dict(type="result", method="clp", run=1, test=0.7, val=0.8, params=dict(base_prior="gcn", alpha=0.9)),
             dict(type="result", method="clp", run=0, test=0.6, val=0.5, params=dict(base_prior="mlp", alpha=0.1))]
    results.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    assert xf._clp_records(results) == [dict(run=0, test=0.6, val=0.5, prior="mlp", alpha=0.1),
                                        dict(run=1, test=0.7, val=0.8, prior="gcn", alpha=0.9)]
    rows = [_row("default", 60.0, 40.0, [0.6, 0.7]), _row("O0", 130.0, 30.0, [0.6, 0.7]),
            _row("O1", 55.0, 36.0, [0.6, 0.71])]
    text = xf.markdown(dict(command="c", checkout="x", machine=C.machine_info(), rows=rows))
    assert "| O0 | `--xla_backend_optimization_level=0` | 130.0 | 30.0 | 28.0 | 100.0 | 23 | 9.0 | 4.0 | yes |" in text
    assert text.count("| no |") == 1  # O1's second split scored otherwise
    # O0: compile 30/40, run (130-30)/(60-40)
    assert "`O0`: compile 0.75x the default's, run (wall - compile) 5.00x, wall 2.17x." in text
    assert "40.0 s for 23 programs, 2.0 s of them tracing and lowering" in text
