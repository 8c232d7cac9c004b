"""Moved to :mod:`treecomp.benchmark.report`; ``bench.report`` is that very module (an alias, so that
attributes set here, as tests do, are seen there)."""

import sys

from treecomp.benchmark import report as _module

if __name__ == "__main__":  # `python -m bench.report ...`
    sys.exit(_module.main(sys.argv[1:]) if hasattr(_module, "main") else 0)
else:
    sys.modules[__name__] = _module
