"""treecomp's benchmark suite: standard cases, a side-by-side runner and a Markdown/PNG report.

`treecomp bench [MODEL] [--quick] [--output-dir DIR]` runs it (in a source checkout also
`python -m bench`); see :mod:`treecomp.benchmark.run` for the strategies measured and how,
:mod:`treecomp.benchmark.cases` for the models, :mod:`treecomp.benchmark.report` for the files
written. Nothing heavy is imported here: the libraries, engines and matplotlib are imported
when a benchmark runs, and are optional (``pip install 'treecomp[bench]'``).
"""
