"""A straightforward PyTorch (CPU) implementation of the CLP pipeline, for the end-to-end comparison.

Mirrors what ``jaxclp.CLP`` does with its defaults (paper settings):

1. MLP prior: Linear(d, 64) - ReLU - Dropout(0.5) - Linear(64, K), full batch, Adam (lr 0.01, weight decay
   5e-5 added to the gradient, as ``torch.optim.Adam``), at most 500 epochs, early stopping after 50 epochs
   without validation improvement (best = highest validation accuracy, ties by lower validation loss).
2. B0 = training labels clamped into the prior; H = Sinkhorn((M Y)^T A B0) in the log domain (same smoothing
   and tolerance as jaxclp).
3. Closed-form CLP for every alpha of the grid 0.1..0.9 with the symmetric normalization: the plain
   (Neumann) iteration ``x <- (1-a) D + a * b0 * (Ahat @ (G * x))`` with ``torch.sparse.mm`` on a CSR
   ``Ahat`` until the increment is <= 1e-6 ||(1-a) D|| per class (jaxclp's "auto" iterates like this when
   alpha * rho_bound <= 0.4 and uses CG above).
4. Select alpha on validation (accuracy, or ROC-AUC for binary Twitch), predict argmax.
"""

from __future__ import annotations

import math

try:
    import torch
except Exception:  # noqa: BLE001 - optional dependency
    torch = None

ALPHAS = tuple(round(0.1 * i, 1) for i in range(1, 10))


def available() -> bool:
    return torch is not None


def _mlp(d, k, hidden=64, dropout=0.5):
    return torch.nn.Sequential(torch.nn.Linear(d, hidden), torch.nn.ReLU(), torch.nn.Dropout(dropout),
                               torch.nn.Linear(hidden, k))


def _masked_ce(logits, y, mask):
    return torch.nn.functional.cross_entropy(logits[mask], y[mask])


def _accuracy(scores, y, mask):
    return (scores[mask].argmax(1) == y[mask]).float().mean()


def roc_auc(score, y, mask) -> float:
    """Binary ROC-AUC of ``score`` (positive class = 1) over ``mask`` (rank formula, ties averaged)."""
    s = score[mask].double()
    t = y[mask]
    pos = int((t == 1).sum())
    neg = int(t.numel() - pos)
    if pos == 0 or neg == 0:
        return float("nan")
    order = torch.argsort(s)
    ranks = torch.empty_like(s)
    ranks[order] = torch.arange(1, s.numel() + 1, dtype=s.dtype)
    # average ranks of ties
    uniq, inv, counts = torch.unique(s, return_inverse=True, return_counts=True)
    sums = torch.zeros(uniq.numel(), dtype=s.dtype).index_add_(0, inv, ranks)
    ranks = (sums / counts)[inv]
    return float((ranks[t == 1].sum() - pos * (pos + 1) / 2) / (pos * neg))


def fit_mlp(x, y, train, val, k, *, seed=0, epochs=500, patience=50, lr=0.01, wd=5e-5):
    torch.manual_seed(seed)
    model = _mlp(x.shape[1], k)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=wd)
    best_acc, best_loss, best_state, bad, epoch = -1.0, math.inf, None, 0, 0
    for epoch in range(epochs):
        model.train()
        opt.zero_grad()
        loss = _masked_ce(model(x), y, train)
        loss.backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            logits = model(x)
            acc = float(_accuracy(logits, y, val))
            vloss = float(_masked_ce(logits, y, val))
        if acc > best_acc or (acc == best_acc and vloss < best_loss):
            best_acc, best_loss, bad = acc, vloss, 0
            best_state = {kk: v.detach().clone() for kk, v in model.state_dict().items()}
        else:
            bad += 1
            if bad >= patience:
                break
    model.load_state_dict(best_state)
    model.eval()
    with torch.no_grad():
        prior = torch.softmax(model(x), dim=1)
    return prior, epoch + 1


def sinkhorn(c, tol=1e-6, max_iters=1000, smoothing=1e-6):
    scale = torch.clamp(c.mean(), min=torch.finfo(c.dtype).tiny)
    cs = c / scale + smoothing
    logc = torch.log(cs)
    f = torch.zeros(c.shape[0], dtype=c.dtype)
    g = torch.zeros(c.shape[1], dtype=c.dtype)
    for _ in range(max_iters):
        f = -torch.logsumexp(logc + g[None, :], dim=1)
        g = -torch.logsumexp(logc + f[:, None], dim=0)
        p = torch.exp(logc + f[:, None] + g[None, :])
        if float((p.sum(1) - 1).abs().max()) <= tol:
            break
    return p


def clp_pipeline(edge_index, n, x, y, train, val, k, *, metric="accuracy", seed=0, tol=1e-6, max_iters=10_000,
                 prior=None, epochs=500):
    """Runs the pipeline; returns (predictions (n,), info dict). ``prior`` skips the MLP when given."""
    if prior is not None:
        epochs = 0
    else:
        prior, epochs = fit_mlp(x, y, train, val, k, seed=seed, epochs=epochs)
    s, r = edge_index[0], edge_index[1]
    ones = torch.ones(s.shape[0])
    # raw adjacency A[r, s] and degrees
    deg_in = torch.zeros(n).index_add_(0, r, ones)
    deg_out = torch.zeros(n).index_add_(0, s, ones)
    y_tr = torch.where(train, y, torch.zeros_like(y))
    my = torch.nn.functional.one_hot(y_tr, k).float() * train[:, None]
    b0 = torch.where(train[:, None], my, prior)
    a_raw = torch.sparse_coo_tensor(torch.stack([r, s]), ones, (n, n)).coalesce().to_sparse_csr()
    counts = my.T @ (a_raw @ b0)
    h = sinkhorn(counts)
    g = b0 @ h
    dinv_in = torch.where(deg_in > 0, deg_in.rsqrt(), torch.zeros_like(deg_in))
    dinv_out = torch.where(deg_out > 0, deg_out.rsqrt(), torch.zeros_like(deg_out))
    vals = dinv_in[r] * dinv_out[s]
    ahat = torch.sparse_coo_tensor(torch.stack([r, s]), vals, (n, n)).coalesce().to_sparse_csr()
    best = None
    iters = []
    for a in ALPHAS:
        rhs = (1 - a) * prior
        rn = torch.linalg.norm(rhs, dim=0)
        xk = rhs.clone()
        for it in range(max_iters):
            new = rhs + a * b0 * torch.sparse.mm(ahat, g * xk)
            done = bool((torch.linalg.norm(new - xk, dim=0) <= tol * rn).all())
            xk = new
            if done:
                break
        iters.append(it + 1)
        if metric == "roc_auc":
            probs = xk / torch.clamp(xk.sum(1, keepdim=True), min=1e-30)
            score = roc_auc(probs[:, 1], y, val)
        else:
            score = float(_accuracy(xk, y, val))
        if best is None or score > best[0]:
            best = (score, a, xk)
    score, alpha, beliefs = best
    proba = beliefs / torch.clamp(beliefs.sum(1, keepdim=True), min=1e-30)
    return beliefs.argmax(1), {"alpha": alpha, "val_score": score, "mlp_epochs": epochs,
                               "neumann_iterations": iters, "H": h.numpy().tolist(), "proba": proba}
