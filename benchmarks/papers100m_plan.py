"""A memory and time model of one CLP step on ogbn-papers100M sharded over 8 or 16 GPUs (a prediction, not a
measurement: no GPU was lent for it).

Per device, with ``b = n / P`` rows, ``E = IMBALANCE * m / P`` edges, ``K`` float32 columns (one row of K values is
``ROW = 4 K`` bytes):

* memory = ``GRAPH_BYTES_PER_EDGE * E`` (sharded graph and edge values) + ``g * ROW * E`` (gather buffers: none with
  the per-shard CSR product) + ``ROW * (c * b + b + S)`` (``c`` (b, K) arrays, the halo buffers of ``S`` slots);
* HBM traffic of a fused step = ``(ROW + 8) * E + 6 * ROW * b`` bytes (plus ``2 * ROW * E`` if an (E, K) buffer is
  written and read back), at ``HBM_BYTES_PER_S``;
* halo per step = ``S * ROW`` bytes over NVLink (``NVLINK_BYTES_PER_S`` per direction) or, on two nodes of 8, the
  ``8 / 15`` of it that crosses InfiniBand at ``IB_BYTES_PER_S`` per GPU;
* the step takes between max(compute, halo) (full overlap) and their sum (none).

The inputs measured on this machine (the METIS edge imbalance and the halo slots per row at P = 8, the (b, K) arrays
a Neumann solve keeps) are named constants below; the hardware figures are the H100's published ones.

    python -m benchmarks.papers100m_plan    # writes benchmarks/results/papers100m_plan.{json,md}
"""

from __future__ import annotations

import sys

from benchmarks import _common as C

N, M, K = 111_059_956, 3.23e9, 172
"""ogbn-papers100M: nodes, directed nonzeros (approximate), classes."""
ROW = 4 * K
"""Bytes of one float32 row of K values."""
IMBALANCE = 1.2
"""Edges of the fullest device / the mean, METIS at P = 8 (the sharded runs)."""
GRAPH_BYTES_PER_EDGE = 20
"""Sharded graph (receivers, senders, global senders, weight: 16 B) and edge values (4 B) per edge."""
ARRAYS = {"Neumann": 15, "CG": 22}
"""(b, K) arrays a solve keeps per device (Neumann: 3 of them in user order)."""
HALO_SLOTS = {8: {"METIS-like": 4.68, "random-like": 6.97}, 16: {"METIS-like": 10.0, "random-like": 15.0}}
"""Halo slots S per row b: measured at P = 8 (METIS; RCM on a random-like graph, ~ (P - 1) b); assumed at P = 16."""
HBM_BYTES_PER_S, NVLINK_BYTES_PER_S, IB_BYTES_PER_S = 3.35e12, 450e9, 50e9
"""H100: HBM3 bandwidth, NVLink per direction, 400 Gb/s InfiniBand per GPU."""
BLOCKS = 4
"""Column blocks of K solved one after the other (each class solves independently once b0 H is formed)."""


def plan(p: int) -> dict:
    """The model's figures for ``p`` devices (bytes, seconds)."""
    b, e = N / p, IMBALANCE * M / p
    graph = GRAPH_BYTES_PER_EDGE * e
    arr = ROW * b
    c = ARRAYS["Neumann"]
    out = {"devices": p, "rows_per_device": b, "edges_per_device": e, "graph_bytes": graph,
           "gather_bytes": ROW * e, "array_bytes": arr}
    for kind, s in HALO_SLOTS[p].items():
        out[f"fused_all_{kind}"] = graph + arr * (c + 1 + s)
        out[f"fused_blocks_{kind}"] = graph + arr + arr / BLOCKS * (c + 1 + s)
        out[f"halo_bytes_{kind}"] = s * arr
    traffic = (ROW + 8) * e + 6 * arr
    out["hbm_bytes"] = traffic
    out["compute_s"] = traffic / HBM_BYTES_PER_S
    out["compute_with_buffer_s"] = (traffic + 2 * ROW * e) / HBM_BYTES_PER_S
    for kind in HALO_SLOTS[p]:
        halo = out[f"halo_bytes_{kind}"]
        if p <= 8:
            out[f"halo_s_{kind}"] = halo / NVLINK_BYTES_PER_S
        else:
            out[f"halo_ib_bytes_{kind}"] = halo * 8 / 15
            out[f"halo_s_{kind}"] = halo * 8 / 15 / IB_BYTES_PER_S
            out[f"halo_nvlink_s_{kind}"] = halo / NVLINK_BYTES_PER_S
    return out


def markdown(rows: list[dict]) -> str:
    gb = lambda x: f"{x / 1e9:.3g} GB"
    ms = lambda s: f"{1e3 * s:.0f} ms"
    r8, r16 = rows
    fit = lambda x: gb(x) + ("" if x <= 80e9 else ": does not fit")
    lines = ["| | 8 × H100 80 GB | 16 × H100 80 GB |", "|---|---|---|",
             f"| b, E per device | {r8['rows_per_device'] / 1e6:.3g}M, {r8['edges_per_device'] / 1e6:.0f}M | "
             f"{r16['rows_per_device'] / 1e6:.3g}M, {r16['edges_per_device'] / 1e6:.0f}M |",
             f"| graph + edge values | {gb(r8['graph_bytes'])} | {gb(r16['graph_bytes'])} |",
             f"| one (E, K) gather (the gather product) | **{fit(r8['gather_bytes'])}** | **{fit(r16['gather_bytes'])}** |",
             f"| one (b, K) array | {gb(r8['array_bytes'])} | {gb(r16['array_bytes'])} |",
             f"| fused product, Neumann, all {K} columns, METIS-like | {fit(r8['fused_all_METIS-like'])} | "
             f"{fit(r16['fused_all_METIS-like'])} |",
             f"| fused product, Neumann, {BLOCKS} column blocks, METIS-like / random-like | "
             f"{gb(r8['fused_blocks_METIS-like'])} / {gb(r8['fused_blocks_random-like'])} | "
             f"{gb(r16['fused_blocks_METIS-like'])} / {gb(r16['fused_blocks_random-like'])} |",
             f"| HBM traffic per step, fused, at {HBM_BYTES_PER_S / 1e12:.3g} TB/s | {gb(r8['hbm_bytes'])} → "
             f"{ms(r8['compute_s'])} ({ms(r8['compute_with_buffer_s'])} if an (E, K) buffer is written and read back) | "
             f"{gb(r16['hbm_bytes'])} → {ms(r16['compute_s'])} ({ms(r16['compute_with_buffer_s'])}) |",
             f"| halo per step, METIS-like | {gb(r8['halo_bytes_METIS-like'])} over NVLink → "
             f"{ms(r8['halo_s_METIS-like'])} | {gb(r16['halo_bytes_METIS-like'])}; on 2 nodes of 8, "
             f"{gb(r16['halo_ib_bytes_METIS-like'])} crosses InfiniBand → {ms(r16['halo_s_METIS-like'])} |",
             f"| halo per step, random-like | {gb(r8['halo_bytes_random-like'])} → {ms(r8['halo_s_random-like'])} | "
             f"{gb(r16['halo_bytes_random-like'])}, {gb(r16['halo_ib_bytes_random-like'])} over InfiniBand → "
             f"{ms(r16['halo_s_random-like'])} |"]
    lo8, hi8 = max(r8["compute_s"], r8["halo_s_METIS-like"]), r8["compute_s"] + r8["halo_s_METIS-like"]
    lo16, hi16 = max(r16["compute_s"], r16["halo_s_METIS-like"]), r16["compute_s"] + r16["halo_s_METIS-like"]
    nv = r16["halo_nvlink_s_METIS-like"]
    lines.append(f"| predicted time per step (full overlap … none), METIS-like | {ms(lo8)}–{ms(hi8)} | "
                 f"{ms(lo16)}–{ms(hi16)} ({ms(max(r16['compute_s'], nv))}–{ms(r16['compute_s'] + nv)} if all 16 GPUs "
                 "share NVLink) |")
    return "\n".join(lines)


def main(argv=None) -> int:
    rows = [plan(8), plan(16)]
    payload = {"command": "python -m benchmarks.papers100m_plan", "rows": rows,
               "inputs": {"n": N, "m": M, "K": K, "imbalance": IMBALANCE, "halo_slots": HALO_SLOTS,
                          "arrays": ARRAYS, "hbm": HBM_BYTES_PER_S, "nvlink": NVLINK_BYTES_PER_S,
                          "ib": IB_BYTES_PER_S, "blocks": BLOCKS}}
    C.save_report("papers100m_plan", payload,
                  "# ogbn-papers100M on 8 or 16 GPUs: a model, not a measurement\n\n"
                  f"Command: `{payload['command']}`. The model and its inputs: the module's docstring.\n\n"
                  + markdown(rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
