"""`python -m bench ...` in a source checkout: the same as `treecomp bench ...` and
`python -m treecomp.benchmark ...` (:func:`treecomp.benchmark.runner.main`). This file also marks
the checkout for treecomp.benchmark.cases, which then caches trained models in bench/.cache."""

import sys

from treecomp.benchmark.runner import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
