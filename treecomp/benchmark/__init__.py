"""treecomp's benchmark suite: standard cases, every engine side by side, a Markdown/PNG report.

The one entry point is `treecomp bench [MODEL] [--quick] [--output-dir DIR]`, which is
:func:`treecomp.benchmark.runner.main` (also ``python -m treecomp.benchmark``). Its parts, each
importing only the ones above it::

    cases    the standard models and data sets (seeded, cached), or a user's model file
    measure  the instruments: timer, peak-RSS meter, cold compile in a process of its own,
             exactness comparison, Skip
    engines  one adapter per engine (the walker and interpreter baselines, treecomp's backends,
             the library's own predict, TL2cgen, ONNX Runtime, lleaves, oneDAL), one interface
    runner   each engine on each case: batch and single-row times, latency per batch size,
             thread scaling, compile time and memory, exactness; the CLI's main
    plots    the PNG plots (matplotlib)
    report   report.md, results.json and the terminal summary (re-rendered from results.json
             by ``python -m treecomp.benchmark.report DIR``)

``runner`` hands its results to ``report``, which draws with ``plots``; ``engines`` need only
``measure``; ``cases`` stands alone. Nothing heavy is imported here: the libraries, engines and
matplotlib are imported when a benchmark runs, and are optional (``pip install
'treecomp[bench]'``).
"""
