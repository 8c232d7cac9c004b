"""`python -m bench ...`: the same as `treecomp bench ...` (see treecomp.benchmark.run.main)."""

import sys

from treecomp.benchmark.run import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
