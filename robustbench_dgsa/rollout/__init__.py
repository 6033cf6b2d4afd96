"""Attention rollout: core maths (core), running a model (runs), what to look through (sources), one image or
text to a figure (explain), stored sets and plots.

``robustbench_dgsa.rollout`` is both this package and the API function ``rb.rollout(model, image) -> heatmap``:
once the package is imported, ``robustbench_dgsa.rollout`` names the package, so the package itself is callable
with the function's arguments (:func:`robustbench_dgsa.rollout.runs.rollout_heatmap`).
"""
from __future__ import annotations

import sys
import types
from typing import Any


class _CallablePackage(types.ModuleType):
    def __call__(self, model: Any, image: Any, **kwargs: Any):
        from robustbench_dgsa.rollout.runs import rollout_heatmap
        return rollout_heatmap(model, image, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
