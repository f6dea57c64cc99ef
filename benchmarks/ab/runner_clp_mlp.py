import sys, tempfile, jaxclp
from jaxclp.experiments import runner
with tempfile.TemporaryDirectory() as t:
    r = runner.run(sys.argv[1], "medium", ["clp_mlp"], runs=2, out=t, progress=False, data_root="/work/shared/datasets")
print([round(x["test"], 4) for x in r], [round(x["seconds"], 1) for x in r], r[0]["features"])
