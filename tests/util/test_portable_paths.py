"""Records name no path of the machine that wrote them: zoo cards hold paths relative to DATA_ROOT, run records
and finished-work records paths relative to their store (or run folder), commands no install path. Checked on
the writers and on the committed cards and campaign store."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from robustbench_dgsa.util.paths import command_line, portable_paths, relative_to

REPO = Path(__file__).resolve().parents[2]
# an absolute POSIX or Windows path inside a JSON string: "/x/…", a space then "/x/…", "C:\…"
ABSOLUTE = re.compile(r'(?:"|\s|:)(/(?:home|work|tmp|Users|root|mnt|data|scratch|opt|srv|var)/[^"\s]*'
                      r'|[A-Za-z]:\\\\[^"]*)')


def _absolute_paths(text: str) -> list[str]:
    return ABSOLUTE.findall(text)


def test_relative_to_and_portable_paths(tmp_path):
    store = tmp_path / "out" / "store"
    ckpt = tmp_path / "out" / "runs" / "vit-s0" / "checkpoint.safetensors"
    assert relative_to(ckpt, store) == "../runs/vit-s0/checkpoint.safetensors"
    rec = {"checkpoint": str(ckpt), "nested": [{"weights": str(tmp_path / "w.pt")}], "dataset": "cifar10",
           "frost_source": "dir:/abs/frost", "n": 3}
    out = portable_paths(rec, store)
    assert out["checkpoint"] == "../runs/vit-s0/checkpoint.safetensors"
    assert out["nested"][0]["weights"] == "../../w.pt"
    assert out["dataset"] == "cifar10" and out["n"] == 3 and out["frost_source"] == "dir:/abs/frost"


@pytest.mark.parametrize("argv, expect", [
    (["/opt/x/site-packages/robustbench_dgsa/__main__.py", "train", "-o", "runs"],
     "python -m robustbench_dgsa train -o runs"),
    (["/home/u/.venv/bin/dgsa-bench", "report"], "dgsa-bench report"),
    ([], ""),
])
def test_command_line_drops_the_install_path(argv, expect):
    assert command_line(argv) == expect


def test_run_record_writer_makes_paths_relative_to_the_store(tmp_path, monkeypatch):
    from robustbench_dgsa import store
    monkeypatch.setattr("sys.argv", [str(tmp_path / "pkg" / "robustbench_dgsa" / "__main__.py"), "evaluate"])
    sd = tmp_path / "out" / "store"
    w = store.RunWriter(sd, "eval-x", {"kind": "eval", "model": "vit"})
    w.write_provenance({"kind": "eval", "checkpoint": str(tmp_path / "out" / "runs" / "a" / "ck.safetensors")})
    text = store.run_record_path(sd, "eval-x").read_text()
    rec = json.loads(text)
    assert rec["checkpoint"] == "../runs/a/ck.safetensors"
    assert rec["command"] == "python -m robustbench_dgsa evaluate"
    assert str(tmp_path) not in text


def test_committed_zoo_cards_hold_no_absolute_path():
    cards = sorted((REPO / "robustbench_dgsa" / "zoo").glob("*.json"))
    assert cards
    for card in cards:
        text = card.read_text(encoding="utf-8")
        assert _absolute_paths(text) == [], card.name
        doc = json.loads(text)
        assert doc["training"]["command"].endswith(f"--data-root DATA_ROOT --model {doc['model']}"), card.name


def test_committed_campaign_records_hold_no_absolute_path():
    store = REPO / "results" / "evidence" / "store"
    records = sorted((store / "runs").glob("*.json")) + sorted((store / "finished").glob("*.json"))
    if not records:
        pytest.skip("no committed campaign store")
    for rec in records:
        assert _absolute_paths(rec.read_text(encoding="utf-8")) == [], rec.name
    # the checkpoints and corruption folders they name are relative to the store
    docs = [json.loads(r.read_text(encoding="utf-8")) for r in records]
    named = [d["checkpoint"] for d in docs if d.get("checkpoint")]
    assert named and all(c.startswith("../runs/") for c in named)
    assert all(d["corruption_dir"].startswith("../corrupted/") for d in docs if d.get("corruption_dir"))
    assert all(d["command"].startswith("python -m robustbench_dgsa ") for d in docs if "command" in d)
