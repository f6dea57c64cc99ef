import sys, time, numpy as np, jaxclp
ds = jaxclp.datasets.load(sys.argv[1], root="/work/shared/datasets")
sp = jaxclp.datasets.random_splits(ds.num_nodes, "medium", num_splits=1, seed=0)
tr, va, te = sp.train[0], sp.val[0], sp.test[0]
y = np.where(tr | va, ds.labels, -1)
m = jaxclp.CLP(num_classes=ds.num_classes, normalization=["sym", "row"], spectral_scale=[False, True],
               alphas=(0.1, 0.3, 0.5, 0.7, 0.9, 0.95, 0.99)).fit(ds.graph, ds.features, y, tr, va)
print(jaxclp.__file__, m.alpha_, (np.asarray(m.predict()) == ds.labels)[te].mean())
