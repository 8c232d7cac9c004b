"""Leaf indices (Predictor.apply): a feature over the Predictor.

Each row's leaf in each tree, numbered, shaped and typed as the source library's own apply
returns them (outputs.leaf_ids: the model's Forest.leaf_layout). Whatever the Predictor's
backend, the ids come from an arrays-backend kernel built once per Predictor, on first use,
over interp.leaf_id_forest (the same routing, leaves holding their ids: native speed, held to
interp.apply by the tests) and kept in its feature_state.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import interp, outputs
from .backends import get
from .loader import Predictor, register_feature


def apply(predictor: Predictor, X: Any) -> np.ndarray:
    """The loader's "apply" feature (Predictor.apply)."""
    forest = predictor.forest("leaf indices (apply)")
    ids = predictor.feature_state.get("leaf_ids")
    if ids is None:  # built once (the arrays backend: no compiler, instant)
        ids = predictor.feature_state["leaf_ids"] = Predictor(
            get("arrays").build(interp.leaf_id_forest(forest)), predictor.n_threads)
    return outputs.leaf_ids(forest, ids.predict_raw(X))


register_feature("apply", apply)
