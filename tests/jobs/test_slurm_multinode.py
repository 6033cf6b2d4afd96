"""Multi-node / multi-GPU sweep jobs (issue 19): ``sweep slurm --nodes/--gpus-per-node/--tasks-per-node`` makes
each array task one data-parallel training started by ``srun``; ``--submitit`` makes it a multi-task job.

* the generated 2-node x 4-GPU script, by its properties and by running its body with stand-ins for ``scontrol``
  and ``srun`` (the rendezvous it exports, the command every rank runs);
* Slurm's own parser: ``sbatch --test-only`` on the single-node cluster of ``.ci/slurm-up`` (no GPUs, one node)
  refuses the 2 x 4 script only for its resources, and accepts it with the resources overridden to what it holds;
  submitit's script for the same layout, likewise;
* the layout checks (library errors and the CLI's one-line errors naming the flag, nothing written);
* the ranks of one job decide together: rank 0 tells the others not to train when the job is finished or locked;
* real runs: a 1-node x 2-task gloo job through sbatch + srun, and the same layout through submitit's local
  executor (its job function takes the ranks from submitit's job environment); each leaves one run record with
  world size 2 and one set of rows.

The cluster tests run where ``sinfo`` reaches a controller with a node up (CI: ``.ci/slurm-up``); skipped
otherwise, and the submitit ones where submitit is not installed.
"""
from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from slurm_cluster import cluster_ready   # tests/slurm_cluster.py

from robustbench_dgsa.engine import distributed
from robustbench_dgsa.jobs import slurm
from robustbench_dgsa.jobs.slurm import ResourceError, SlurmResources, write_slurm_script
from robustbench_dgsa.jobs.sweep import plan, run_one, write_plan
from robustbench_dgsa.util.errors import UserError

TINY = {"model.dim": "16", "model.depth": "1", "model.heads": "2", "model.head_hidden": "16",
        "train.epochs": "1", "train.batch_size": "32", "data.max_train": "64", "data.max_test": "32",
        "train.device": "cpu"}
# Seconds a real run (sbatch, submitit's local executor) may take: its 2 tiny CPU processes need a few CPU-seconds
# each; a machine busy with other work may set DGSA_LIVE_TEST_TIMEOUT_S higher.
LIVE_TIMEOUT_S = float(os.environ.get("DGSA_LIVE_TEST_TIMEOUT_S", "120"))
LIVE_MINUTES = str(max(2, math.ceil(LIVE_TIMEOUT_S / 60)))
# What sbatch says when the controller cannot place a job here (no GPUs, one node, too few CPUs), as opposed to a
# script it cannot read (exit 255: unknown option, bad value).
RESOURCE_WORDS = re.compile(r"generic resource|gres|node configuration is not available|requested node|"
                            r"not available|node count|resources", re.I)
PARSE_WORDS = re.compile(r"unrecognized option|invalid option|is not a valid|sbatch --help|unable to parse", re.I)


cluster = pytest.mark.skipif(not cluster_ready(), reason="no live SLURM controller (sinfo/sbatch)")


@pytest.fixture()
def sweep_dir(tmp_path):
    sd = tmp_path / "sweep"
    write_plan(sd, plan(["vit"], [0, 1, 2], ["synthetic-vision"], "tiny", TINY), device="cpu")
    return sd


def _directives(text: str) -> dict[str, str]:
    """``#SBATCH --key=value`` lines as {key: value}; a repeated key fails the test."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("#SBATCH --"):
            key, _, value = line[len("#SBATCH --"):].partition("=")
            assert key not in found, f"--{key} twice"
            found[key] = value
    return found


# --- the generated script ----------------------------------------------------------------------------------------

def test_two_nodes_by_four_gpus_script(sweep_dir):
    text = write_slurm_script(sweep_dir, nodes=2, gpus_per_node=4, cpus=6, mem="64G").read_text()
    d = _directives(text)
    assert (d["nodes"], d["ntasks-per-node"], d["gpus-per-node"], d["cpus-per-task"]) == ("2", "4", "4", "6")
    assert d["array"] == "0-2" and d["mem"] == "64G" and "gres" not in d and "ntasks" not in d
    body = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    srun = [ln for ln in body if ln.startswith("srun ")]
    assert len(srun) == 1 and body[-1] == srun[0], body                  # one step, the last command
    argv = shlex.split(srun[0])
    assert "--kill-on-bad-exit=1" in argv and "--cpus-per-task=6" in argv
    assert argv[-5:] == ["sweep", "run-one", str(sweep_dir.resolve()), "--index", "$SLURM_ARRAY_TASK_ID"]
    exports = [ln for ln in body if ln.startswith("export MASTER_")]
    assert [e.split("=")[0] for e in exports] == ["export MASTER_ADDR", "export MASTER_PORT"]
    assert body.index(exports[-1]) < body.index(srun[0])


def test_the_script_body_exports_the_rendezvous_and_sruns_every_rank(sweep_dir, tmp_path):
    """The body runs under bash with stand-ins for scontrol and srun: MASTER_ADDR is the first node, MASTER_PORT
    the job's port (:func:`distributed.slurm_port`), and srun gets the run-one command of the array task."""
    script = write_slurm_script(sweep_dir, nodes=2, gpus_per_node=4, command="dgsa-bench")
    bin_dir, seen = tmp_path / "bin", tmp_path / "srun.json"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text('#!/bin/sh\n[ "$1 $2 $3" = "show hostnames gpu[07-08]" ] && '
                                      'printf "gpu07\\ngpu08\\n"\n')
    (bin_dir / "srun").write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                                  f"json.dump({{'argv': sys.argv[1:], 'addr': os.environ['MASTER_ADDR'], "
                                  f"'port': os.environ['MASTER_PORT']}}, open({str(seen)!r}, 'w'))\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_JOB_NODELIST": "gpu[07-08]", "SLURM_JOB_ID": "123457",
           "SLURM_ARRAY_TASK_ID": "2"}
    proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(seen.read_text())
    assert got["addr"] == "gpu07"
    assert int(got["port"]) == distributed.slurm_port("123457") == 20000 + 123457 % 20000
    assert got["argv"][-6:] == ["dgsa-bench", "sweep", "run-one", str(sweep_dir.resolve()), "--index", "2"]
    # what each rank then reads (srun's per-task variables): its rank, the world, its GPU
    ranks = [distributed.env_world({"SLURM_PROCID": str(r), "SLURM_STEP_NUM_TASKS": "8",
                                    "SLURM_LOCALID": str(r % 4)}) for r in range(8)]
    assert ranks == [(r, 8, r % 4) for r in range(8)]


def test_single_process_and_cpu_layouts(sweep_dir):
    plain = _directives(write_slurm_script(sweep_dir).read_text())
    assert plain["gres"] == "gpu:1" and not {"nodes", "ntasks-per-node", "gpus-per-node"} & set(plain)
    assert "srun" not in (sweep_dir / "slurm" / "sweep.sbatch").read_text()
    text = write_slurm_script(sweep_dir, tasks_per_node=2, gpus=0, cpus=1).read_text()
    d = _directives(text)
    assert (d["nodes"], d["ntasks-per-node"]) == ("1", "2") and "gpus-per-node" not in d and "gres" not in d
    assert "gloo" in text and "\nsrun --kill-on-bad-exit=1 --cpus-per-task=1 " in text
    same = _directives(write_slurm_script(sweep_dir, nodes=2, gpus_per_node=2, tasks_per_node=2).read_text())
    assert (same["ntasks-per-node"], same["gpus-per-node"]) == ("2", "2")


# --- the layout checks -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("values, key", [
    (dict(nodes=0), "nodes"),
    (dict(nodes=2), "nodes"),                                   # how many processes per node?
    (dict(gpus_per_node=-1), "gpus_per_node"),
    (dict(tasks_per_node=0), "tasks_per_node"),
    (dict(gpus_per_node=4, tasks_per_node=2), "tasks_per_node"),
    (dict(gpus_per_node=4, gpus=4), "gpus"),
    (dict(tasks_per_node=2, gpus=1), "gpus"),
    (dict(gpus_per_node=2, gpus=0), "gpus"),
    (dict(nodes=True, tasks_per_node=2), "nodes"),
])
def test_bad_layouts_are_refused_and_nothing_is_written(sweep_dir, values, key):
    with pytest.raises(ResourceError) as e:
        write_slurm_script(sweep_dir, **values)
    assert e.value.key == key
    assert not (sweep_dir / "slurm").exists()


def test_the_global_batch_must_divide_among_all_processes(sweep_dir):
    with pytest.raises(UserError, match=r"job vit-synthetic-vision-tiny-s0-\w+ on 2 node\(s\) x 3 processes per "
                                        r"node: the batch size 32 .* all 6 processes and must divide evenly"):
        write_slurm_script(sweep_dir, nodes=2, gpus_per_node=3)
    assert not (sweep_dir / "slurm").exists()
    write_slurm_script(sweep_dir, nodes=2, gpus_per_node=4)              # 32 / 8
    assert SlurmResources.checked(nodes=2, gpus_per_node=4).world == 8
    assert SlurmResources.checked(gpus_per_node=0).multi is False        # 0 GPUs per node: today's one process


def test_cli_layout_errors_are_one_line_naming_the_flag(sweep_dir, run_cli_cases):
    sd = str(sweep_dir)
    cases = [
        (["sweep", "slurm", sd, "--nodes", "2"], "--nodes: expected 1 unless the processes per node are given"),
        (["sweep", "slurm", sd, "--nodes", "0"], "--nodes"),
        (["sweep", "slurm", sd, "--gpus-per-node", "4", "--tasks-per-node", "2"], "--tasks-per-node: expected"),
        (["sweep", "slurm", sd, "--gpus-per-node", "4", "--gpus", "1"], "--gpus: expected no per-job GPU count"),
        (["sweep", "slurm", sd, "--nodes", "2", "--gpus-per-node", "3"], "must divide evenly"),
        (["sweep", "slurm", sd, "--submitit", "--nodes", "2", "--gpus-per-node", "3"], "must divide evenly"),
        (["sweep", "slurm", sd, "--submitit", "--nodes", "3"], "--nodes: expected 1 unless"),
    ]
    results = run_cli_cases([a for a, _ in cases] + [["sweep", "slurm", sd, "--nodes", "2", "--gpus-per-node",
                                                      "4"]])
    for (args, expect), (code, err) in zip(cases, results):
        err = err.strip()
        assert code == 2, (args, err)
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        assert err.startswith("error:") and expect in err, (expect, err)
    code, err = results[-1]
    assert code == 0, err
    assert _directives((sweep_dir / "slurm" / "sweep.sbatch").read_text())["gpus-per-node"] == "4"
    assert not (sweep_dir / "slurm" / "submitit").exists()   # no refused submission left a pickle


# --- the ranks of one job decide together --------------------------------------------------------------------------

@pytest.fixture()
def two_ranks(monkeypatch):
    """run_job as rank ``r`` of a 2-process group, with the collective recorded: returns (set_rank, words), where
    ``words`` lists the flag each rank passed to the one all_true (rank 0's word) and ``answer`` fakes its result."""
    from robustbench_dgsa.engine.distributed import World
    from robustbench_dgsa.jobs import job as job_runner
    state = {"rank": 0, "answer": True}
    words: list[bool] = []

    def all_true(flag, world):
        words.append(bool(flag))
        return state["answer"] and bool(flag)
    monkeypatch.setattr(job_runner, "group_size", lambda: 2)
    monkeypatch.setattr(distributed, "setup", lambda device, batch: (World(state["rank"], 2, 0, "gloo"), device))
    monkeypatch.setattr(distributed, "all_true", all_true)
    monkeypatch.setattr("robustbench_dgsa.engine.train.train", lambda *a, **k: pytest.fail("trained"))
    return state, words


def test_rank_0_stops_the_others_when_the_job_is_finished_or_locked(sweep_dir, two_ranks, monkeypatch):
    from robustbench_dgsa.jobs import job as job_runner
    from robustbench_dgsa.jobs.sweep import load_jobs
    state, words = two_ranks
    job = load_jobs(sweep_dir)[0]
    monkeypatch.setattr(job_runner, "read_done", lambda root, j, precision=None: {"job": j.to_dict(), "finished": True})
    assert job_runner.run_job(sweep_dir, job)["finished"] and words == [False]     # told once: do not train
    words.clear()
    monkeypatch.setattr(job_runner, "read_done", lambda root, j, precision=None: None)
    monkeypatch.setattr(job_runner.JobLock, "__enter__", lambda self: (_ for _ in ()).throw(
        job_runner.JobLocked("job is being run by pid 1")))
    with pytest.raises(job_runner.JobLocked):
        job_runner.run_job(sweep_dir, job)
    assert words == [False]
    words.clear()
    state.update(rank=1, answer=False)                     # rank 1 hears "no": it returns without training
    assert job_runner.run_job(sweep_dir, job) == {"job": job.to_dict(), "rank": 1, "trained": False}
    assert words == [True]


# --- submitit ----------------------------------------------------------------------------------------------------

def test_submitit_multi_task_parameters(sweep_dir):
    res = SlurmResources.checked(nodes=2, gpus_per_node=4, cpus=6, mem="64G", time="90")
    params = slurm.submitit_parameters(sweep_dir, res, 3)
    assert (params["nodes"], params["tasks_per_node"], params["gpus_per_node"]) == (2, 4, 4)
    assert params["cpus_per_task"] == 6 and params["slurm_mem"] == "64G" and params["timeout_min"] == 90
    assert slurm.job_function(res) is slurm.run_one_rank
    assert slurm.job_function(SlurmResources.checked()) is run_one
    cpu = slurm.submitit_parameters(sweep_dir, SlurmResources.checked(tasks_per_node=2, gpus=0), 3)
    assert (cpu["nodes"], cpu["tasks_per_node"], cpu["gpus_per_node"]) == (1, 2, 0)
    one = slurm.submitit_parameters(sweep_dir, SlurmResources.checked(), 3)
    assert one["gpus_per_node"] == 1 and "nodes" not in one and "tasks_per_node" not in one


def _submitit_script(sweep_dir: Path, res: SlurmResources) -> str:
    """The sbatch script submitit itself would submit for these resources."""
    submitit = pytest.importorskip("submitit")
    if shutil.which("srun") is None:  # submitit's SlurmExecutor refuses to exist without srun ("Could not detect")
        pytest.skip("srun not on PATH (submitit's slurm executor needs it)")
    ex = submitit.AutoExecutor(folder=str(sweep_dir / "slurm" / "submitit"), cluster="slurm")
    ex.update_parameters(**slurm.submitit_parameters(sweep_dir, res, 3))
    try:
        return ex._executor._make_submission_file_text("python -m submitit.core._submit x", "uid")
    except AttributeError:  # pragma: no cover - a submitit without this (private) method
        pytest.skip("this submitit cannot show its sbatch script")


def test_submitit_script_asks_for_two_nodes_by_four_gpus(sweep_dir):
    d = _directives(_submitit_script(sweep_dir, SlurmResources.checked(nodes=2, gpus_per_node=4, cpus=6)))
    assert (d["nodes"], d["ntasks-per-node"], d["gpus-per-node"], d["cpus-per-task"]) == ("2", "4", "4", "6")


def test_submitit_local_executor_runs_a_two_task_ddp_job(sweep_dir, monkeypatch):
    """The real submission path with submitit's local executor: each array job is a 2-task job, both tasks run
    :func:`slurm.run_one_rank`, which takes rank, world and rendezvous from submitit's job environment."""
    submitit = pytest.importorskip("submitit")
    submitted: list = []
    _use_local_executor(monkeypatch, submitit, submitted)
    try:
        ids = slurm.submit_submitit(sweep_dir, tasks_per_node=2, gpus=0, cpus=1, mem="1G",
                                    time_limit=LIVE_MINUTES, max_parallel=1)
        assert len(ids) == 3 and len(submitted) == 1
        jobs = _wait_for_files(sweep_dir, 1)
        results = submitted[0].results()                      # one per task: rank 0's record, rank 1's note
    finally:
        for job in submitted:
            job.cancel(check=False)
    assert results[0]["train_run_id"] and results[1] == {"job": results[0]["job"], "rank": 1, "trained": True}
    _assert_one_ddp_run(sweep_dir, jobs[0])


def _use_local_executor(monkeypatch, submitit, submitted: list) -> None:
    """submit_submitit's AutoExecutor made to run on this machine (cluster="local"), only job 0 of the sweep
    (appended to ``submitted``)."""
    real = submitit.AutoExecutor

    class Local(real):  # type: ignore[misc, valid-type]
        def __init__(self, folder: str) -> None:
            super().__init__(folder=folder, cluster="local")

        def map_array(self, fn, dirs, indices):  # noqa: ANN001 - submitit's signature
            assert fn is slurm.run_one_rank and self._executor.parameters["tasks_per_node"] == 2
            job = self.submit(fn, dirs[0], indices[0])       # one 2-task job is enough (and fast)
            submitted.append(job)
            return [job, *[type("Job", (), {"job_id": f"not-run-{i}"})() for i in indices[1:]]]

    monkeypatch.setattr(submitit, "AutoExecutor", Local)


def _wait_for_files(sweep_dir: Path, n: int) -> list[Path]:
    deadline = time.monotonic() + LIVE_TIMEOUT_S
    while time.monotonic() < deadline:
        done = sorted((sweep_dir / "runs").glob("*/job_done.json"))
        if len(done) >= n:
            return [d.parent for d in done]
        time.sleep(1)
    logs = "\n".join(p.read_text()[-400:] for p in (sweep_dir / "slurm").rglob("*.err"))
    pytest.fail(f"no finished job after {LIVE_TIMEOUT_S} s; logs:\n{logs}")


def _assert_one_ddp_run(sweep_dir: Path, job_folder: Path) -> None:
    """One training run record, of 2 gloo processes, one set of training rows and one of evaluation rows."""
    store = sweep_dir / "store"
    records = {p.stem: json.loads(p.read_text()) for p in (store / "runs").glob("*.json")}
    train = {k: r for k, r in records.items() if k.startswith("train-")}
    assert len(train) == 1 and len(records) == 2, sorted(records)
    (record,) = train.values()
    assert record["world_size"] == 2 and record["backend"] == "gloo" and len(record["hosts"]) == 2
    rows = sorted(p.stem for p in (store / "rows").glob("*.jsonl"))
    assert rows == sorted(records), rows
    lines = [json.loads(ln) for ln in (store / "rows" / f"{next(iter(train))}.jsonl").read_text().splitlines()]
    keys = [(r.get("split"), r.get("metric"), r.get("epoch")) for r in lines]
    assert len(keys) == len(set(keys)), "a rank other than 0 wrote rows"
    done = json.loads((job_folder / "job_done.json").read_text())
    assert done["train_run_id"] == next(iter(train)) and done["eval_run_id"] in records


# --- Slurm's own parser and a live run ---------------------------------------------------------------------------

def _test_only(script: Path, *overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sbatch", "--test-only", *overrides, str(script)], capture_output=True, text=True,
                          timeout=60)


FITS_HERE = ["--nodes=1", "--ntasks-per-node=1", "--cpus-per-task=1", "--mem=100M", "--gpus-per-node=0"]


def _assert_parsed(script: Path) -> None:
    """sbatch reads the script; the controller refuses it at most for resources this cluster lacks, and takes
    it once they are overridden to what one node holds."""
    as_is = _test_only(script)
    said = (as_is.stdout + as_is.stderr).strip()
    assert not PARSE_WORDS.search(said) and as_is.returncode != 255, said
    assert as_is.returncode == 0 or RESOURCE_WORDS.search(said), said
    fits = _test_only(script, *FITS_HERE)
    said = (fits.stdout + fits.stderr).strip()
    assert fits.returncode == 0 and "to start at" in said, said


@cluster
def test_sbatch_parses_the_two_by_four_script(sweep_dir):
    _assert_parsed(write_slurm_script(sweep_dir, nodes=2, gpus_per_node=4, time_limit="10"))
    broken = sweep_dir / "slurm" / "broken.sbatch"              # the check tells a parse error from a refusal
    broken.write_text("#!/bin/bash\n#SBATCH --nodes=two\ntrue\n")
    assert _test_only(broken, *FITS_HERE).returncode != 0


@cluster
def test_sbatch_parses_submitits_two_by_four_script(sweep_dir):
    text = _submitit_script(sweep_dir, SlurmResources.checked(nodes=2, gpus_per_node=4, cpus=6, time="10"))
    script = sweep_dir / "submitit.sbatch"
    script.write_text(text)
    _assert_parsed(script)


@cluster
@pytest.mark.slow
def test_one_node_two_task_gloo_job_runs_through_slurm(tmp_path):
    sd = tmp_path / "live sweep"
    write_plan(sd, plan(["vit"], [0], ["synthetic-vision"], "tiny", TINY), device="cpu")
    setup = ["export OMP_NUM_THREADS=1"]
    if os.environ.get("PYTHONPATH"):
        setup.append(f"export PYTHONPATH={shlex.quote(os.environ['PYTHONPATH'])}")
    script = write_slurm_script(sd, tasks_per_node=2, gpus=0, cpus=1, mem="1G", time_limit=LIVE_MINUTES,
                                setup=setup, command=f"{shlex.quote(sys.executable)} -m robustbench_dgsa")
    try:
        proc = subprocess.run(["sbatch", "--wait", "--parsable", str(script)], capture_output=True, text=True,
                              timeout=LIVE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        subprocess.run(["scancel", "--name", f"dgsa-{sd.name.replace(' ', '_')}"], capture_output=True)
        pytest.fail(f"the SLURM job did not finish in {LIVE_TIMEOUT_S} s")
    logs = "".join(p.read_text() for p in (sd / "slurm").glob("*.out"))
    assert proc.returncode == 0, (proc.stderr, logs)
    assert "2 processes (gloo)" in logs, logs
    (job,) = (sd / "runs").iterdir()
    _assert_one_ddp_run(sd, job)
