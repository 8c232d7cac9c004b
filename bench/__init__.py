"""Benchmark scripts that only make sense in a source checkout.

The benchmark itself is in the package, :mod:`treecomp.benchmark` (cases, measure, engines,
runner, plots, report), so that `treecomp bench` works from an installed treecomp too;
``python -m bench [MODEL] [--quick] [--output-dir DIR]`` is kept as a checkout shortcut for it.
Each script here imports only the package's public names and measures something the package's
runner does not:

- ``python -m bench.interleaved``: engines timed round-robin, so a shared machine's load hits
  every engine alike;
- ``python -m bench.scaleout``: treecomp against the library's own predict over Dask workers;
- ``python -m bench.calibrate_auto``: checks ``backend="auto"``'s cost model, prints a refit;
- ``python bench/linear_speed.py``: LightGBM linear_tree models, saved artifacts loaded back;
- ``python bench/arrays_so_speed.py``: the arrays .so against the in-process path, and from C;
- ``bench/compare-env.sh``: the runner with lleaves, oneDAL, ONNX Runtime and TL2cgen in a venv
  of their own (their pins clash with treecomp's main environment).
"""
