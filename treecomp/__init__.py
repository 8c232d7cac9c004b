"""treecomp: compile decision-tree ensembles (scikit-learn, XGBoost) into fast, exact predictors."""

from __future__ import annotations

__version__ = "0.1.0"

from .errors import (ArtifactError, CompileError, InvalidModelError, KernelError,  # noqa: E402
                     NotFittedError, TreecompError, UnsupportedModelError, WriteError)
from .frontends import parse, supported_models  # noqa: E402
from .ir import Forest, Tree  # noqa: E402
from .loader import Predictor  # noqa: E402
from .api import compile, load  # noqa: E402

__all__ = ["__version__", "parse", "compile", "load", "Predictor", "supported_models", "Forest", "Tree", "TreecompError",
           "UnsupportedModelError", "InvalidModelError", "NotFittedError", "CompileError",
           "ArtifactError", "KernelError", "WriteError"]
