"""Figure targets of ``jaxclp reproduce`` (paper Figs. 1, 4, 5, 6, 7 and CLP with spectral/diffusion features).

Each target ``f(out, *, runs=10, datasets=None, data_root=None, argv=None, quick=None) -> list[Path]`` writes its
data (JSON, plus Markdown where a table is natural) and PNG plot(s) into ``<out>/figures/`` and its per-split
records (the runner's JSON Lines format, resumable) into ``<out>/figures/records/<name>/``. ``quick=True`` (or
``JAXCLP_ANALYSES_QUICK=1``) selects a reduced configuration that runs in seconds (files get a ``_quick``
suffix). See ``results/figures/README.md``.
"""

from jaxclp.experiments.analyses.common import QUICK, homophily_bins, run_mirror
from jaxclp.experiments.analyses.cost import fig7
from jaxclp.experiments.analyses.dagger import clp_dagger
from jaxclp.experiments.analyses.ensembles import prior_ensembles
from jaxclp.experiments.analyses.label_rate import fig6
from jaxclp.experiments.analyses.micro import fig1
from jaxclp.experiments.analyses.crossfit import selection
from jaxclp.experiments.analyses.synthetic_sweep import fig4, fig5

__all__ = ["QUICK", "TARGETS", "clp_dagger", "fig1", "fig4", "fig5", "fig6", "fig7", "homophily_bins", "prior_ensembles",
           "run_mirror", "selection"]

TARGETS = {"fig1": fig1, "fig4": fig4, "fig5": fig5, "fig6": fig6, "fig7": fig7, "clp_dagger": clp_dagger,
           "selection": selection, "prior_ensembles": prior_ensembles}
