"""`python -m miniformer …` == `miniformer …` (the DAG tools call it this way so no PATH set-up is needed)."""

import sys

from miniformer.cli import main

sys.exit(main())
