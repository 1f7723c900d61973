"""`python -m miniformer …` == `miniformer …` (the DAG tools call it this way so no PATH set-up is needed)."""

from miniformer.cli import console

console()
