"""specsweep's Python side, on the controller: what a sweep is and how its results read.

- `analysis.sweep`: the sweep config (one grid point), the request typed after `-e`, the engines'
  launch commands and the plan every host receives (called by the Ansible plugins).
- `analysis.search`: the step search that chooses which configs to launch.
- `analysis.facts`: the result-fact schema, its writer and its loader into pandas frames.
- `analysis.report`: step-count tables, plots and the HTML report.
- `analysis.nightly`: the history store and the regression check.
`python -m analysis` is the one command line over them (analysis.cli).
"""
