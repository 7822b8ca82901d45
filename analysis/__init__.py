"""specsweep's Python side, on the controller: what a sweep is and how its results read.

- `analysis.sweep`: the sweep config (one grid point), the request typed after `-e`, the engines'
  launch commands and the plan every host receives (called by the Ansible plugins).
- `analysis.workloads`: the traffic a sweep sends, built at plan time.
- `analysis.facts`: the result-fact schema, its writer and its loader into pandas frames.
- `analysis.running`: where a sweep stands while it runs, and racing.
- `analysis.search`: the step search that chooses which configs to launch.
- `analysis.report`: step-count tables, plots and the HTML report.
- `analysis.nightly`: the history store and the regression check.
- `analysis.deploy`: putting a sweep's answer into production, gated.
The layers they import along: docs/design.md. `python -m analysis` is the one command line over
them (analysis.cli).
"""
