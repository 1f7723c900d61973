"""The study's reading of its runs: judge the published claims and draw the report's figures (the `aggregate` and
`report` stages in stages/ call these).

  roles.py      which experiment plays which part; claims.py the published claims as a table (claim, source, rule)
  stats.py      intervals (paired bootstrap + each run's own or the pooled seed spread), the one verdict rule
  findings.py   the evidence the claims read, the breakage log and the peer cross-check
  figures.py    the report's figures; hovermap.py the attention map's hover text; bibliography.py the references
"""
