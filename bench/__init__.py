"""treecomp's benchmark suite: standard cases, a side-by-side runner and a Markdown/PNG report.

`python -m bench [MODEL] [--quick] [--out DIR]` (or `treecomp bench ...`) runs it; see
bench.run for the strategies measured and how, bench.cases for the models, bench.report for the
files written.
"""
