"""`python -m bench ...`: the same as `treecomp bench ...` (see bench.run.main)."""

import sys

from bench.run import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
