"""The one JSON sanitiser and the one comma-list splitter."""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from robustbench_dgsa.util.jsonio import to_jsonable
from robustbench_dgsa.util.errors import UserError
from robustbench_dgsa.util.lists import split_list


@dataclasses.dataclass
class _Rec:
    a: int
    b: tuple


def test_to_jsonable_gives_plain_json_types():
    obj = {"f32": np.float32(1.5), "i64": np.int64(3), "b": np.bool_(True), 2: "two", None: 0,
           "path": Path("/x/y"), "arr": np.arange(3).reshape(1, 3), "t0": torch.tensor(2.5),
           "t": torch.tensor([1, 2]), "set": {4}, "tup": (1, (2,)), "rec": _Rec(1, (2, 3)), np.int64(7): "k"}
    out = to_jsonable(obj)
    assert out == {"f32": 1.5, "i64": 3, "b": True, "2": "two", "null": 0, "path": "/x/y", "arr": [[0, 1, 2]],
                   "t0": 2.5, "t": [1, 2], "set": [4], "tup": [1, [2]], "rec": {"a": 1, "b": [2, 3]}, "7": "k"}
    assert type(out["i64"]) is int and type(out["b"]) is bool
    json.dumps(out, sort_keys=True, allow_nan=False)   # strict JSON, sortable keys


def test_to_jsonable_unknown_values_and_nonfinite_floats():
    with pytest.raises(TypeError, match="object"):
        to_jsonable({"x": object()})
    assert to_jsonable([object], fallback=lambda o: "described") == ["described"]
    vals = [math.inf, -math.inf, math.nan, np.float64("nan"), 1.0]
    assert to_jsonable(vals, nonfinite="text") == ["inf", "-inf", "nan", "nan", 1.0]
    assert to_jsonable(vals, nonfinite="null") == [None, None, None, None, 1.0]
    kept = to_jsonable(vals)
    assert math.isinf(kept[0]) and math.isnan(kept[2])
    with pytest.raises(ValueError, match="nonfinite"):
        to_jsonable(vals, nonfinite="zero")


def test_split_list_flattens_strips_and_dedupes():
    assert split_list(None) == []
    assert split_list("") == []
    assert split_list(" vit , dvit,vit ") == ["vit", "dvit"]
    with pytest.raises(UserError, match="blank item"):  # a typo, not an item to skip (issue 22 item 19)
        split_list("vit,,dvit")
    with pytest.raises(UserError, match="blank item"):
        split_list(["vit", "dvit,"])
    assert split_list(["vit,dvit", "dgvit", " vit"]) == ["vit", "dvit", "dgvit"]
