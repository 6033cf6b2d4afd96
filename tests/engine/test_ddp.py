"""Data-parallel training (torch.distributed, gloo, 2 processes on the CPU) against one process.

Tolerance: with dropout 0 the two-process gradient is the one-process gradient up to the order of float additions
(DDP's all-reduce), so losses and weights agree to ``RTOL`` (relative, per tensor: max |a - b| / max |a|) after
30 AdamW steps; accuracies, which count integer predictions, are identical. One exception: the key part of the
attention's qkv bias has a gradient that is zero in exact arithmetic (softmax ignores a shift shared by all keys of
a query), so AdamW, which divides by the gradient's own size, turns float noise there into steps of up to ``lr``;
that part is only checked to stay within ``KEY_BIAS_ATOL``.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from robustbench_dgsa.engine import distributed
from robustbench_dgsa.engine.distributed import World

RTOL = 1e-5
KEY_BIAS_ATOL = 2e-3
EPOCHS = 5
# 95 training examples in batches of 16 (last batch 15: uneven shards 8 / 7), 12 validation (6 / 6) and
# 41 test examples (uneven evaluation blocks 21 / 20); augmentation on (synthetic-vision is an image set).
SETS = {"model.dim": 16, "model.depth": 1, "model.heads": 2, "model.head_hidden": 16, "model.dropout": 0.0,
        "data.max_train": 96, "data.max_test": 41,
        # fp32: the tolerances below are float summation order; under bf16 autocast (amp "auto" on a CPU with native
        # bf16) two ranks round their half-batch activations differently and the losses part by ~3e-5 relative after one epoch
        "train.amp": "off"}
ARGS = ["train", "--model", "vit", "--dataset", "synthetic-vision", "--preset", "tiny", "--epochs", str(EPOCHS),
        "--batch-size", "16", "--device", "cpu", "-q"] + [a for k, v in SETS.items() for a in ("--set", f"{k}={v}")]


def _cfg():
    from robustbench_dgsa.config import resolve_config
    from robustbench_dgsa.models import get_model_config
    return resolve_config(get_model_config("vit"), "synthetic-vision", "tiny",
                          overrides={"train.epochs": EPOCHS, "train.batch_size": 16, "train.device": "cpu", **SETS})


def _cli(args: list[str], **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "robustbench_dgsa", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def _weights(run: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file
    return load_file(str(run / "checkpoint.safetensors"))


def _assert_close_weights(a: Path, b: Path) -> None:
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys()
    for k in wa:
        a, b = wa[k], wb[k]
        if k.endswith("attn.qkv.bias"):  # [q | k | v]: see the module docstring for the key part
            qkv_a, qkv_b = a.chunk(3), b.chunk(3)
            assert float((qkv_a[1] - qkv_b[1]).abs().max()) <= KEY_BIAS_ATOL, k
            a, b = torch.cat([qkv_a[0], qkv_a[2]]), torch.cat([qkv_b[0], qkv_b[2]])
        scale = float(a.abs().max()) or 1.0
        assert float((a - b).abs().max()) <= RTOL * scale, k


def _history(run: Path) -> list[dict]:
    from robustbench_dgsa.engine.train_state import load_state
    return load_state(run / "train_state.safetensors")["history"]


def _assert_same_curve(a: list[dict], b: list[dict]) -> None:
    assert [h["epoch"] for h in a] == [h["epoch"] for h in b]
    for ha, hb in zip(a, b):
        assert ha["train_loss"] == pytest.approx(hb["train_loss"], rel=RTOL)
        assert ha["val_loss"] == pytest.approx(hb["val_loss"], rel=RTOL)
        assert (ha["train_accuracy"], ha["val_accuracy"]) == (hb["train_accuracy"], hb["val_accuracy"])


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One process, global batch 16: (run folder, result)."""
    from robustbench_dgsa.engine.train import train
    out = tmp_path_factory.mktemp("ddp") / "one"
    return out, train(_cfg(), 0, out, progress=False)


# --- the sharding rules ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n,size", [(16, 2), (15, 2), (1, 2), (7, 3), (10, 4)])
def test_rank_shards_of_a_batch_are_the_batch(n, size):
    shards = [distributed.batch_shard(n, World(r, size)) for r in range(size)]
    assert sorted(torch.cat(shards).tolist()) == list(range(n))
    assert max(map(len, shards)) - min(map(len, shards)) <= 1
    assert distributed.batch_shard(n, World()) is None


@pytest.mark.parametrize("n,size", [(41, 2), (12, 2), (1, 3), (0, 2), (100, 7)])
def test_evaluation_blocks_count_every_example_once(n, size):
    blocks = [distributed.eval_shard(n, World(r, size)) for r in range(size)]
    assert [i for b in blocks for i in range(n)[b]] == list(range(n))
    assert distributed.eval_shard(n, World()) == slice(0, n)


def test_loss_share_makes_the_mean_gradient_of_the_global_batch():
    # two ranks with 8 and 7 of 15 examples: DDP averages the two gradients, so each rank's mean loss must weigh
    # 2 * local / 15 for the average to be the 15-example mean
    per_example = torch.arange(15, dtype=torch.float64)
    world = [World(r, 2) for r in range(2)]
    parts = [per_example[distributed.batch_shard(15, w)] for w in world]
    averaged = sum(distributed.scale_loss(p.mean(), len(p), 15, w) for p, w in zip(parts, world)) / 2
    assert float(averaged) == pytest.approx(float(per_example.mean()), rel=1e-15)
    loss = torch.tensor(1.5)
    assert distributed.scale_loss(loss, 8, 16, World(0, 2)) is loss  # even shards: untouched


def test_environment_of_torchrun_and_srun():
    assert distributed.env_world({}) is None
    assert distributed.env_world({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}) == (3, 4, 1)
    slurm = {"SLURM_PROCID": "5", "SLURM_STEP_NUM_TASKS": "8", "SLURM_LOCALID": "1", "SLURM_JOB_ID": "77"}
    assert distributed.env_world(slurm) == (5, 8, 1)
    assert distributed.env_world({"SLURM_PROCID": "0", "SLURM_NTASKS": "4"}) is None  # the batch script, no srun
    one_node = distributed._rendezvous_env({**slurm, "SLURM_STEP_NUM_NODES": "1"})
    assert one_node == {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(20000 + 77)}
    from robustbench_dgsa.util.errors import UserError
    with pytest.raises(UserError, match="MASTER_ADDR"):
        distributed._rendezvous_env({**slurm, "SLURM_STEP_NUM_NODES": "2"})


# --- bad input: one line, exit 2, nothing written -------------------------------------------------------------------

def test_global_batch_that_does_not_divide_is_refused(tmp_path, run_main, monkeypatch):
    args = [*ARGS, "--out", str(tmp_path / "run")]
    args[args.index("--batch-size") + 1] = "33"
    code, _, err = run_main([*args, "--nproc", "2"], tmp_path)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:") and "33" in lines[0], err
    # the same under torchrun's environment: refused before any connection is made
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    code, _, err = run_main(args, tmp_path)
    assert code == 2 and [ln for ln in err.splitlines() if ln.startswith("error:")] == [err.strip()], err
    code, _, err = run_main([*ARGS, "--out", str(tmp_path / "run"), "--nproc", "2"], tmp_path)
    assert code == 2 and "torchrun" in err and err.count("error:") == 1
    assert not (tmp_path / "run").exists()


# --- two processes against one ---------------------------------------------------------------------------------------

def test_two_processes_train_as_one(reference, tmp_path):
    ref, res = reference
    p = _cli([*ARGS, "--out", str(tmp_path / "two"), "--nproc", "2", "--json"])
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    run = json.loads(out)["runs"][0]                      # one JSON document: rank 0 alone prints
    _assert_same_curve(run["history"], res.history)
    assert run["final"]["test_accuracy"] == res.final["test_accuracy"]
    assert run["final"]["test_loss"] == pytest.approx(res.final["test_loss"], rel=RTOL)
    _assert_close_weights(ref, tmp_path / "two")
    # one set of files: one rows file, one run record (with the group), rows as many as one process writes
    store = tmp_path / "two" / "store"
    rows, records = list((store / "rows").glob("*.jsonl")), list((store / "runs").glob("*.json"))
    assert len(rows) == 1 and len(records) == 1
    ref_rows = next((ref / "store" / "rows").glob("*.jsonl")).read_text().splitlines()
    assert len(rows[0].read_text().splitlines()) == len(ref_rows)
    record = json.loads(records[0].read_text())
    assert record["world_size"] == 2 and record["backend"] == "gloo" and len(record["hosts"]) == 2
    assert json.loads((ref / "store" / "runs" / f"{res.run_id}.json").read_text())["world_size"] == 1
    assert "Traceback" not in err


def test_resume_one_process_run_in_two(reference, tmp_path):
    from robustbench_dgsa.engine.train import train
    ref, res = reference
    train(_cfg(), 0, tmp_path / "run", progress=False, stop_after_epoch=2)
    p = _cli([*ARGS, "--out", str(tmp_path / "run"), "--nproc", "2", "--resume"])
    _, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    _assert_same_curve(_history(tmp_path / "run"), res.history)
    _assert_close_weights(ref, tmp_path / "run")


def _worker(launcher: int, rank: int) -> int | None:
    """The pid of the launcher's worker process with ``RANK=rank`` (read from /proc), or None yet."""
    for task in Path(f"/proc/{launcher}/task").glob("*"):
        for pid in (task / "children").read_text().split():
            try:
                env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if f"RANK={rank}".encode() in env:
                return int(pid)
    return None


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc to find the worker processes")
def test_killed_rank_ends_the_job_with_one_line_and_it_resumes_in_one_process(reference, tmp_path):
    from robustbench_dgsa.engine.train import train
    ref, res = reference
    run = tmp_path / "run"
    p = _cli([*ARGS, "--out", str(run), "--nproc", "2"])
    try:
        deadline = time.monotonic() + 240
        while not (run / "train_state.safetensors").exists():   # rank 0 finished epoch 1
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()[1]
            time.sleep(0.02)
        victim = _worker(p.pid, 1)
        assert victim is not None
        os.kill(victim, signal.SIGKILL)
        killed = time.monotonic()
        _, err = p.communicate(timeout=60)
        assert time.monotonic() - killed < 60
    finally:
        if p.poll() is None:
            p.kill()
    errors = [ln for ln in err.splitlines() if "error" in ln.lower()]
    assert p.returncode == 1 and len(errors) == 1 and errors[0].startswith("error:"), err
    assert "rank 1" in errors[0] and "SIGKILL" in errors[0] and "--resume" in errors[0]
    assert "Traceback" not in err
    assert not (run / "done.json").exists() and (run / "checkpoint.safetensors").exists()
    resumed = train(_cfg(), 0, run, progress=False, resume=True)     # the two-process state, one process on
    _assert_same_curve(resumed.history, res.history)
    assert resumed.final["test_accuracy"] == res.final["test_accuracy"]
    _assert_close_weights(ref, run)
    assert len(list((run / "store" / "rows").glob("*.jsonl"))) == 1


_EXIT_SCRIPT = """
import atexit, sys, threading
from robustbench_dgsa.engine import distributed
if sys.argv[1] == "joined":
    distributed._JOINED.append(distributed.World(1, 2, 1, "gloo"))
atexit.register(lambda: print("exit handlers ran", flush=True))
print("buffered line", end="")            # flushed by exit_process
class Aborts:                              # stands for gloo's teardown at interpreter exit
    def __del__(self):
        print("interpreter teardown ran", flush=True)
keep = Aborts()
distributed.exit_process(int(sys.argv[2]))
"""


@pytest.mark.parametrize("joined", [True, False])
def test_exit_process_skips_the_interpreter_teardown_only_in_a_rank(joined):
    """A rank leaves by os._exit after the exit handlers and flushed streams (gloo's teardown at exit could abort a
    finished rank); any other process exits normally. Same exit code either way."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    p = subprocess.run([sys.executable, "-c", _EXIT_SCRIPT, "joined" if joined else "alone", "3"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 3, p.stderr
    assert "buffered line" in p.stdout and "exit handlers ran" in p.stdout
    assert ("interpreter teardown ran" in p.stdout) is (not joined)
