"""treecomp: compile decision-tree ensembles (scikit-learn, XGBoost, LightGBM, CatBoost, ONNX) into
fast, exact predictors. The public API: parse, compile, load, Predictor, the errors."""

from __future__ import annotations

from .version import __version__
from .errors import (ArtifactError, CompileError, InvalidModelError, KernelError,  # noqa: E402
                     NotFittedError, PlatformError, SlowPathWarning, TreecompError, TreecompWarning,
                     UnsupportedModelError, WriteError)
from .frontends import parse, supported_models  # noqa: E402
from .ir import Forest, Tree  # noqa: E402
from .loader import Predictor  # noqa: E402
from .api import compile, load  # noqa: E402
# the features over predictions register themselves with the loader (loader.FEATURES)
from . import leaves, linear, shap  # noqa: E402,F401

__all__ = ["__version__", "parse", "compile", "load", "Predictor", "supported_models", "Forest", "Tree", "TreecompError",
           "UnsupportedModelError", "InvalidModelError", "NotFittedError", "CompileError",
           "ArtifactError", "KernelError", "WriteError", "TreecompWarning", "SlowPathWarning", "PlatformError"]
