"""The study's reading of its runs: gather every run's numbers, judge the published claims, draw and render the report.

  aggregate.py  every run's metrics and per-window samples -> results/metrics.json, results/windows.json
  stats.py      intervals (paired bootstrap + seed spread) and the one verdict rule
  claims.py     the published claims as a table: claim, source, runs, rule
  findings.py   the evidence the claims read, the breakage log and the peer cross-check
  figures.py    the report's figures
  report.py     report/report.html from the template
"""
