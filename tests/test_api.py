"""The public API: every name resolves, the package import stays light."""
import subprocess
import sys

import pytest

import robustbench_dgsa


def test_public_names_resolve():
    for name in robustbench_dgsa.__all__:
        assert getattr(robustbench_dgsa, name) is not None, name
    assert callable(robustbench_dgsa.benchmark) and callable(robustbench_dgsa.create_model)
    assert set(robustbench_dgsa.list_models("image")) >= {"vit", "dvit", "dgvit"}
    assert "dgt" in robustbench_dgsa.list_models("text") and "dgt" not in robustbench_dgsa.list_models("image")
    with pytest.raises(AttributeError):
        robustbench_dgsa.no_such_name  # noqa: B018


def test_import_is_light():
    code = "import sys, robustbench_dgsa; print(sorted(m for m in ('torch', 'pandas', 'timm') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_compare_accepts_a_store_folder(tmp_path):
    from robustbench_dgsa import store
    from robustbench_dgsa.util.errors import UserError
    for model, acc in (("a", 0.5), ("b", 0.6)):
        w = store.RunWriter(tmp_path, store.new_run_id("eval"), base=dict(kind="eval", model=model,
                                                                           dataset="d", split="test", seed=0))
        w.add_rows([dict(condition="clean", severity=0, metric="accuracy", value=acc, n=10)])
    cmp = robustbench_dgsa.compare(tmp_path, condition="clean")
    assert cmp.info["models"] == ["a", "b"]
    with pytest.raises(UserError):
        robustbench_dgsa.compare(tmp_path / "missing")
