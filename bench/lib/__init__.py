"""tandem's benchmark suite: the library behind bench/run.

Modules, from the bottom up:
  errors      the one exception hierarchy of the suite
  stats       median and min-max spread over repetitions, grouping of result rows
  csvout      one CSV per experiment, columns in a stable order
  svg         line and grouped bar charts as standalone SVG (no third-party packages)
  fio         fio command lines for the nbd engine and parsing of fio's JSON output
  procs       process groups, clean-up, CPU accounting from /proc
  cluster     tandem nodes on loopback: drbd.conf generation, start, Primary, replica check
  machine     the machine description of the report
  seeds       citations of the seed documents in ../shared/seeds
  modes       --smoke / --quick / default / --full sizes and durations
  report      Markdown tables and the report.md assembly
  experiments every experiment, one module each, and the list of pending ones

Invariant: only procs, cluster, machine, fio.run_job and the experiments touch processes or the
clock; stats, csvout, svg, fio parsing and report are pure functions of their inputs (that is
what bench/tests checks).
"""
