"""One base predictor's fit on Texas (split 0 of the medium protocol) in this process, with JAX's compile events
summed (trace, lowering, backend compile): ``XLA_FLAGS=... python benchmarks/ab/xla_flags_compile.py NAME[,NAME]``.
Used for ``benchmarks/results/xla_flags.md``; data from ``$JAXCLP_DATA`` (default ``../shared/datasets``)."""
import collections, time, sys, os
import jax, numpy as np
from jax import monitoring
acc = collections.defaultdict(float); cnt = collections.Counter()
def lis(event, dur, **kw):
    acc[event] += dur; cnt[event] += 1
monitoring.register_event_duration_secs_listener(lis)
from jaxclp.datasets import load
from jaxclp.experiments import runner, methods
from jaxclp.priors import fit_prior
ds = load("texas", root=os.environ.get("JAXCLP_DATA", "../shared/datasets"))
feats, _ = runner.node_features(ds)
sp = runner.get_splits(ds, "medium", 1, 0)
tr, va = np.asarray(sp.train[0]), np.asarray(sp.val[0])
y = runner.visible_labels(np.asarray(ds.labels), tr, va)
cfg = methods.prior_train_config(type("C", (), {"train_cfg": None, "metric": ds.metric})())
for name in sys.argv[1].split(","):
    acc.clear(); cnt.clear()
    opts = {"grid": methods.gnn_grid(name.split("_")[0]), "lr": methods.GNN_LR} if "tuned" in name else {}
    t = time.perf_counter()
    r = fit_prior(name, jax.random.key(0), ds.graph, feats, y, tr, va, ds.num_classes, cfg, **opts)
    jax.block_until_ready(r.prior)
    wall = time.perf_counter() - t
    print(name, f"wall {wall:.2f}", {k.split('/')[-1]: (round(v, 2), cnt[k]) for k, v in acc.items() if 'compile' in k or 'trace' in k or 'lower' in k})
