"""The one job runner: locks with a live owner are never taken over, stale ones are, ids stay inside runs/,
and two concurrent `sweep run -j 2` on one folder never train a job twice."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from robustbench_dgsa import store
from robustbench_dgsa.jobs.job import (LOCK, Job, JobLock, JobLocked, check_job_id, job_dir, owner_alive,
                                       process_start, run_job)
from robustbench_dgsa.jobs.sweep import load_jobs, plan, write_plan
from robustbench_dgsa.util.errors import UserError

TINY = {"model.dim": "16", "model.depth": "1", "model.heads": "2", "model.head_hidden": "16",
        "train.epochs": "1", "train.batch_size": "32", "data.max_train": "64", "data.max_test": "32",
        "train.device": "cpu"}


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _plant_lock(folder, **info) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / LOCK).write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid(),
                                           "start": process_start(os.getpid()), **info}))


def test_live_lock_is_never_taken_over(tmp_path):
    with JobLock(tmp_path):
        with pytest.raises(JobLocked, match=f"pid {os.getpid()}"):
            with JobLock(tmp_path):
                pass
        assert (tmp_path / LOCK).exists()
    assert not (tmp_path / LOCK).exists()          # released by its owner
    with JobLock(tmp_path):                         # and free again
        pass


@pytest.mark.skipif(process_start(os.getpid()) is None, reason="needs /proc for process start times")
def test_stale_locks_are_taken_over(tmp_path):
    _plant_lock(tmp_path, pid=_dead_pid())                       # the owner is gone
    with JobLock(tmp_path) as lock:
        assert json.loads((tmp_path / LOCK).read_text())["token"] == lock.me["token"]
    _plant_lock(tmp_path, start="1")                             # our pid, but another process's start time
    with JobLock(tmp_path):
        pass
    (tmp_path / LOCK).write_text("not json")                     # junk
    with JobLock(tmp_path):
        pass


def test_lock_from_another_host_needs_a_stale_heartbeat(tmp_path):
    _plant_lock(tmp_path, host="node-elsewhere", pid=1)
    with pytest.raises(JobLocked, match="node-elsewhere"):
        with JobLock(tmp_path):
            pass
    old = time.time() - 3600
    os.utime(tmp_path / LOCK, (old, old))                       # no heartbeat for an hour
    assert not owner_alive(json.loads((tmp_path / LOCK).read_text()), old)
    with JobLock(tmp_path):
        pass


def test_release_never_deletes_another_owners_lock(tmp_path):
    lock = JobLock(tmp_path)
    lock.__enter__()
    _plant_lock(tmp_path, token="someone-else")
    lock.__exit__(None, None, None)
    assert json.loads((tmp_path / LOCK).read_text())["token"] == "someone-else"


@pytest.mark.parametrize("bad", ["../evil", "/tmp/abs", "a/b", ".hidden", "..", "", "x\nsh", 7])
def test_job_ids_cannot_leave_runs(tmp_path, bad):
    with pytest.raises(UserError, match="invalid job id"):
        check_job_id(bad)
    job = Job(id=bad, model="vit", dataset="synthetic-vision", preset="tiny", seed=0)
    with pytest.raises(UserError, match="invalid job id"):
        run_job(tmp_path / "sw", job)
    assert not (tmp_path / "sw").exists() and not (tmp_path / "evil").exists()


def test_jobs_file_with_escaping_id_is_refused_with_the_line(tmp_path):
    sd = tmp_path / "sw"
    jobs = write_plan(sd, plan(["vit"], [0], ["synthetic-vision"], "tiny", TINY), device="cpu")
    evil = dict(jobs[0].to_dict(), id="../../outside")
    with open(sd / "jobs.jsonl", "a") as f:
        f.write(json.dumps(evil) + "\n")
    with pytest.raises(UserError, match=r"jobs.jsonl line 2: invalid job id"):
        load_jobs(sd)
    (sd / "jobs.jsonl").write_bytes(b'{"id": "x"\n\xff\xfe')
    with pytest.raises(UserError, match="jobs.jsonl"):
        load_jobs(sd)


@pytest.mark.parametrize("job_id, ok", [("a..b", False), ("x" * 201, False), (".a", False), ("x" * 200, True),
                                        ("vit-synthetic-vision-tiny-s0-0123abcd", True)])
def test_one_job_id_rule(tmp_path, job_id, ok):
    """A sweep's jobs.jsonl and the job runner accept the same ids (one validator, one pattern): an id the
    sweep file takes never fails later in check_job_id, and the reverse."""
    sd = tmp_path / "sw"
    jobs = write_plan(sd, plan(["vit"], [0], ["synthetic-vision"], "tiny", TINY), device="cpu")
    (sd / "jobs.jsonl").write_text(json.dumps(dict(jobs[0].to_dict(), id=job_id)) + "\n")
    if ok:
        assert check_job_id(job_id) == job_id and [j.id for j in load_jobs(sd)] == [job_id]
        assert Job.from_dict(json.loads((sd / "jobs.jsonl").read_text())) == load_jobs(sd)[0]
    else:
        with pytest.raises(UserError, match="invalid job id"):
            check_job_id(job_id)
        with pytest.raises(UserError, match=r"jobs.jsonl line 1: invalid job id"):
            load_jobs(sd)


def test_job_dir_is_inside_runs(tmp_path):
    job = Job(id="vit-a-tiny-s0-12345678", model="vit", dataset="a", preset="tiny", seed=0)
    assert job_dir(tmp_path, job) == tmp_path / "runs" / job.id


@pytest.mark.slow
def test_two_concurrent_sweep_runs_never_train_a_job_twice(tmp_path):
    sd = tmp_path / "sw"
    jobs = write_plan(sd, plan(["vit"], [0, 1], ["synthetic-vision"], "tiny", TINY), device="cpu")
    cmd = [sys.executable, "-m", "robustbench_dgsa", "sweep", "run", str(sd), "-j", "2", "--json"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    summaries = [json.loads(out) for out, _ in outs]
    ran = [j for s in summaries for j in s["ran"]]
    assert sorted(ran) == sorted(j.id for j in jobs) and not any(s["failed"] for s in summaries)
    df = store.load_results(sd / "store")
    for kind in ("train", "eval"):
        per_seed = df[df.kind == kind].groupby("seed")["run_id"].nunique()
        assert per_seed.to_dict() == {0: 1, 1: 1}, (kind, per_seed)   # one run per job, never two
    ev = df[(df.kind == "eval") & (df.metric == "accuracy")]
    assert len(ev) == len(jobs)
    assert not any((job_dir(sd, j) / LOCK).exists() for j in jobs)


def test_a_store_copied_without_its_checkpoints_resumes_without_retraining(tmp_path):
    """A finished job is known from the store alone (store/finished/<job>.json + its rows): a store copied to
    another folder (the committed campaign on a fresh machine) does not train it again; a record of another job,
    or one whose rows are missing, does not count."""
    import shutil
    from robustbench_dgsa.jobs.job import is_finished
    src = tmp_path / "a"
    [job] = plan(["vit"], [0], ["synthetic-vision"], "tiny", TINY)
    first = run_job(src, job, device="cpu")
    dst = tmp_path / "b"
    shutil.copytree(src / "store", dst / "store")
    assert is_finished(dst, job)
    again = run_job(dst, job, device="cpu")                    # nothing trained: the same record comes back,
    assert {**again, "checkpoint": None} == {**first, "checkpoint": None}
    # its checkpoint named from the new folder (records hold paths relative to their store, none of the old machine)
    assert again["checkpoint"] == str(dst.absolute() / "runs" / job.id / "checkpoint.safetensors")
    assert first["checkpoint"] == str(src.absolute() / "runs" / job.id / "checkpoint.safetensors")
    assert not (dst / "runs").exists()
    [other] = plan(["vit"], [1], ["synthetic-vision"], "tiny", TINY)
    assert not is_finished(dst, other)
    rec = json.loads((dst / "store" / "finished" / f"{job.id}.json").read_text())
    (dst / "store" / "finished" / f"{other.id}.json").write_text(json.dumps(rec))   # another job's record
    assert not is_finished(dst, other)
    (dst / "store" / "rows" / f"{rec['eval_run_id']}.jsonl").unlink()
    assert not is_finished(dst, job)
