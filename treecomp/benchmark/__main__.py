"""`python -m treecomp.benchmark ...`: the same as `treecomp bench ...`."""

import sys

from treecomp.benchmark.runner import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
