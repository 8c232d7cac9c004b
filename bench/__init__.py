"""treecomp's benchmark suite, source-checkout entry points.

The code lives in the package, :mod:`treecomp.benchmark` (cases, runner, report), so that
`treecomp bench` works from an installed treecomp too. ``bench.cases``, ``bench.run`` and
``bench.report`` are the same module objects as ``treecomp.benchmark.cases`` / ``.run`` /
``.report``; ``python -m bench [MODEL] [--quick] [--output-dir DIR]`` is ``treecomp bench``.
The scripts that only make sense in a checkout stay here: bench.interleaved, bench.scaleout,
bench.calibrate_auto and compare-env.sh.
"""
