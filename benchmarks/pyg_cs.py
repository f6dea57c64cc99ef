"""PyG's MLP + CorrectAndSmooth on a folder of ``edges.npy`` / ``labels.npy`` (-1: hidden) / ``features.npy``.

Run by :mod:`benchmarks.large_graph` with an interpreter that has torch and torch_geometric (the ``bench``
extra); it imports nothing of jaxclp. The labelled nodes are split 80/20 into training and validation (seed 0); the
MLP (2 layers, hidden 64, dropout 0.5, Adam lr 0.01, weight decay 5e-5, <= 500 full-batch epochs, early stopping
on validation accuracy with patience 50, as jaxclp's MLP prior) is followed by PyG's ``CorrectAndSmooth`` with
its ogbn-products example settings (50 correction layers, alpha 1.0; 50 smoothing layers, alpha 0.8; autoscale
off, scale 20). Prints one JSON line: accuracy on the hidden nodes (with the truth from ``truth.npy``), seconds.
"""

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch_geometric.nn import MLP
from torch_geometric.nn.models import CorrectAndSmooth
from torch_geometric.utils import to_undirected


def main(folder: str) -> None:
    t0 = time.perf_counter()
    folder = Path(folder)
    torch.manual_seed(0)
    edges = torch.from_numpy(np.load(folder / "edges.npy")).t().contiguous()
    visible = np.load(folder / "labels.npy")
    x = torch.from_numpy(np.load(folder / "features.npy"))
    truth = np.load(folder / "truth.npy")
    n = x.shape[0]
    edge_index = to_undirected(edges, num_nodes=n)
    labelled = np.flatnonzero(visible >= 0)
    rng = np.random.default_rng(0)
    rng.shuffle(labelled)
    n_val = int(round(0.2 * labelled.size))
    val, train = torch.from_numpy(labelled[:n_val]), torch.from_numpy(labelled[n_val:])
    hidden = torch.from_numpy(np.flatnonzero(visible < 0))
    y = torch.from_numpy(np.where(visible >= 0, visible, 0)).long()
    k = int(visible.max()) + 1
    model = MLP([x.shape[1], 64, k], dropout=0.5, norm=None)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-5)
    best, best_state, bad = -1.0, None, 0
    for _ in range(500):
        model.train()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x)[train], y[train])
        loss.backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            acc = (model(x)[val].argmax(1) == y[val]).float().mean().item()
        if acc > best:
            best, best_state, bad = acc, {k_: v.clone() for k_, v in model.state_dict().items()}, 0
        else:
            bad += 1
            if bad >= 50:
                break
    model.load_state_dict(best_state)
    model.eval()
    with torch.no_grad():
        soft = model(x).softmax(dim=-1)
    t_mlp = time.perf_counter() - t0
    cs = CorrectAndSmooth(num_correction_layers=50, correction_alpha=1.0, num_smoothing_layers=50,
                          smoothing_alpha=0.8, autoscale=False, scale=20.0)
    fed = torch.cat([train, val])  # C&S feeds every labelled node's label, as PyG's example feeds train + val
    out = cs.correct(soft, y[fed], fed, edge_index)
    out = cs.smooth(out, y[fed], fed, edge_index)
    mlp_acc = float((soft[hidden].argmax(1).numpy() == truth[hidden.numpy()]).mean())
    acc = float((out[hidden].argmax(1).numpy() == truth[hidden.numpy()]).mean())
    print(json.dumps({"accuracy": acc, "mlp_accuracy": mlp_acc, "mlp_seconds": t_mlp,
                      "seconds": time.perf_counter() - t0, "torch": torch.__version__}))


if __name__ == "__main__":
    main(sys.argv[1])
