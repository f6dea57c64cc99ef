"""``python -m jaxclp ...``: the ``jaxclp`` console command (:mod:`jaxclp.experiments.cli`)."""

import sys

from jaxclp.experiments.cli import main

sys.exit(main())
