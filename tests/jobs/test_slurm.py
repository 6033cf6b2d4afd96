"""Slurm: every time format and memory unit written through faithfully, bad values refused with one line,
paths quoted for the shell and for sbatch, submitit parameters; sweep plans checked at plan time; damaged
sweep files and reproduce --quick with explicit names."""
from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys

import pytest

from robustbench_dgsa.jobs.slurm import (ResourceError, SlurmResources, parse_mem, parse_time, sbatch_script,
                                         submit_submitit, submitit_parameters, write_slurm_script)
from robustbench_dgsa.jobs.sweep import load_jobs, load_settings, plan, write_plan
from robustbench_dgsa.util.errors import UserError

TINY = {"model.dim": "16", "model.depth": "1", "model.heads": "2", "model.head_hidden": "16",
        "train.epochs": "1", "train.batch_size": "32", "data.max_train": "96", "data.max_test": "32"}


@pytest.fixture()
def sweep_dir(tmp_path):
    sd = tmp_path / "sw"
    write_plan(sd, plan(["vit"], [0, 1, 2], ["synthetic-vision"], "tiny", TINY))
    return sd


def _sbatch_value(text: str, option: str) -> str:
    line = next(ln for ln in text.splitlines() if ln.startswith(f"#SBATCH --{option}="))
    return line.split("=", 1)[1]


# (time as given, minutes)
GOOD_TIMES = [("90", 90), ("5", 5), ("90:30", 91), ("00:45", 1), ("36:00:00", 2160), ("01:30:00", 90),
              ("2-0", 2880), ("1-12", 2160), ("1-12:30", 2190), ("1-12:00:00", 2160), ("0-00:00:30", 1)]


@pytest.mark.parametrize("given, minutes", GOOD_TIMES, ids=[t for t, _ in GOOD_TIMES])
def test_every_slurm_time_format_is_written_through(sweep_dir, given, minutes):
    assert parse_time(given) == minutes
    text = write_slurm_script(sweep_dir, time_limit=given).read_text()
    assert _sbatch_value(text, "time") == given


@pytest.mark.parametrize("given, mb", [("500M", 500), ("500m", 500), ("4096", 4096), ("32G", 32768),
                                       ("1T", 1048576), ("2048K", 2), ("1k", 1)])
def test_every_memory_unit_is_written_through(sweep_dir, given, mb):
    assert parse_mem(given) == mb
    assert _sbatch_value(write_slurm_script(sweep_dir, mem=given).read_text(), "mem") == given


BAD_VALUES = [
    (dict(time_limit="bogus"), "time", "bogus"), (dict(time_limit=""), "time", "''"),
    (dict(time_limit="0"), "time", "0"), (dict(time_limit="00:00:00"), "time", "00:00:00"),
    (dict(time_limit="1:60"), "time", "1:60"), (dict(time_limit="1:60:00"), "time", "1:60:00"),
    (dict(time_limit="1-24"), "time", "1-24"), (dict(time_limit="-5"), "time", "-5"),
    (dict(time_limit="1.5"), "time", "1.5"), (dict(time_limit="1-12:00:00:00"), "time", "1-12:00:00:00"),
    (dict(time_limit="\u0663\u0660"), "time", "\u0663\u0660"),   # Arabic-Indic digits: not Slurm's
    (dict(mem="500MB"), "mem", "500MB"), (dict(mem="0"), "mem", "0"), (dict(mem="-1G"), "mem", "-1G"),
    (dict(mem="1.5G"), "mem", "1.5G"), (dict(mem="G"), "mem", "G"), (dict(mem="lots"), "mem", "lots"),
    (dict(gpus=-1), "gpus", "-1"), (dict(cpus=0), "cpus", "0"), (dict(max_parallel=0), "max_parallel", "0"),
    (dict(partition="gpu main"), "partition", "gpu main"), (dict(account="a'b"), "account", "a'b"),
    (dict(setup=["echo a\necho b"]), "setup", "echo a"),
]


@pytest.mark.parametrize("bad, key, shown", BAD_VALUES, ids=[f"{k}={s}" for _, k, s in BAD_VALUES])
def test_bad_slurm_values_are_refused_with_one_line_and_nothing_written(sweep_dir, bad, key, shown):
    with pytest.raises(ResourceError) as e:
        write_slurm_script(sweep_dir, **bad)
    msg = str(e.value)
    assert "\n" not in msg and e.value.key == key and msg.startswith(f"Slurm {key}: expected ")
    assert shown.split("\n")[0] in msg
    assert not (sweep_dir / "slurm").exists()
    with pytest.raises(ResourceError):   # submitit path: refused before anything is imported or submitted
        submit_submitit(sweep_dir, **bad)


def test_paths_with_spaces_and_dollars_reach_the_shell_intact(tmp_path):
    sd = tmp_path / "my sweep $HOME 'q' %x"
    write_plan(sd, plan(["vit"], [0], ["synthetic-vision"], "tiny", TINY))
    path = write_slurm_script(sd, setup=["echo setup-ran"])
    text = path.read_text()
    resolved = sd.resolve()
    # sbatch reads the same quotes as the shell; % is doubled in a Slurm file pattern
    out_value = _sbatch_value(text, "output")
    assert shlex.split(out_value) == [str(resolved).replace("%", "%%") + "/slurm/%A_%a.out"]
    assert _sbatch_value(text, "job-name") == "dgsa-my_sweep_HOME_q_x"
    # run the script with a stand-in dgsa-bench: it must receive the folder as one argument, unexpanded
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "dgsa-bench"
    fake.write_text('#!/bin/bash\nprintf "%s\\n" "$@" > "$ARGS_OUT"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", SLURM_ARRAY_TASK_ID="0",
               ARGS_OUT=str(tmp_path / "args.txt"), HOME="/should-not-appear")
    p = subprocess.run(["bash", str(path)], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "setup-ran"
    assert (tmp_path / "args.txt").read_text().splitlines() == ["sweep", "run-one", str(resolved), "--index", "0"]


def test_paths_sbatch_cannot_read_are_refused(tmp_path):
    sd = tmp_path / "back\\slash"
    write_plan(sd, plan(["vit"], [0], ["synthetic-vision"], "tiny", TINY))
    with pytest.raises(UserError, match="backslash"):
        write_slurm_script(sd)


def test_script_layout(sweep_dir):
    text = write_slurm_script(sweep_dir, partition="gpu", account="lab-1", max_parallel=2, gpus=0,
                              setup=["source .venv/bin/activate"]).read_text()
    assert "#SBATCH --array=0-2%2" in text and "#SBATCH --partition=gpu" in text and "#SBATCH --account=lab-1" in text
    assert "--gres" not in text and "source .venv/bin/activate" in text
    assert '--index "$SLURM_ARRAY_TASK_ID"' in text and text.startswith("#!/bin/bash\n")
    assert (sweep_dir / "slurm" / "sweep.sbatch").stat().st_mode & stat.S_IXUSR
    with_gpu = sbatch_script(sweep_dir, 3, SlurmResources.checked(gpus=2))
    assert "#SBATCH --gres=gpu:2" in with_gpu and "#SBATCH --time=24:00:00" in with_gpu


def test_submitit_parameters_keep_time_and_memory(sweep_dir):
    res = SlurmResources.checked(time="1-12:00:00", mem="500M", gpus=0, cpus=2, partition="p", setup=["echo x"])
    params = submitit_parameters(sweep_dir, res, 3)
    assert params["timeout_min"] == 2160 and params["slurm_mem"] == "500M"
    assert params["slurm_array_parallelism"] == 3 and params["slurm_partition"] == "p"
    assert params["slurm_setup"] == ["echo x"]
    submitit = pytest.importorskip("submitit")
    ex = submitit.AutoExecutor(folder=str(sweep_dir / "slurm" / "submitit"), cluster="debug")
    ex.update_parameters(**params)   # every name is one submitit knows


def test_submitit_missing_gives_install_hint(sweep_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "submitit", None)
    with pytest.raises(UserError, match=r"pip install 'robustbench-dgsa\[slurm\]'"):
        submit_submitit(sweep_dir)


# --- sweep plans are checked at plan time --------------------------------------------------------------------

@pytest.mark.parametrize("overrides, expect", [
    ({"train.epochs": "1.5"}, "train.epochs: expected an integer ≥ 1, got 1.5"),
    ({"train.lr": "-1"}, "train.lr: expected a number > 0, got -1"),
    ({"train.nope": "1"}, "unknown config key 'train.nope'"),
    ({"model.dim": "30", "model.heads": "4"}, "vit on synthetic-vision: model config 'vit': dim 30 must be divisible"),
])
def test_sweep_plan_refuses_bad_overrides_at_plan_time(overrides, expect):
    with pytest.raises(UserError) as e:
        plan(["vit"], [0], ["synthetic-vision"], "tiny", overrides)
    assert expect in str(e.value) and "\n" not in str(e.value)


# --- damaged sweep files: one line naming the file and line --------------------------------------------------

def _job_line(**kw) -> str:
    job = {"id": "vit-x-tiny-s0-1", "model": "vit", "dataset": "synthetic-vision", "preset": "tiny", "seed": 0,
           "overrides": {}}
    job.update(kw)
    return json.dumps(job)


@pytest.mark.parametrize("lines, expect", [
    (["garbage"], "line 1: not valid JSON"),
    ([_job_line(), "[1, 2]"], "line 2: expected a JSON object (a job), got list"),
    ([_job_line(id="../../escape")], "line 1: invalid job id"),
    ([json.dumps({"id": "a"})], "line 1: the job lacks model, dataset, preset, seed"),
    ([_job_line(seed="zero")], "line 1: seed must be an integer ≥ 0"),
    ([_job_line(overrides={"train.epochs": "1.5"})], "line 1: train.epochs: expected an integer ≥ 1, got 1.5"),
    ([_job_line(), _job_line()], "appears twice"),
])
def test_garbage_jobs_file_is_one_line(sweep_dir, lines, expect):
    path = sweep_dir / "jobs.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(UserError) as e:
        load_jobs(sweep_dir)
    assert expect in str(e.value) and str(path) in str(e.value) and "\n" not in str(e.value)


def test_non_utf8_jobs_and_garbage_settings(sweep_dir):
    (sweep_dir / "jobs.jsonl").write_bytes(_job_line().encode() + b"\n\xff\xfe\n")
    with pytest.raises(UserError, match=r"jobs.jsonl line 2: not UTF-8 text"):
        load_jobs(sweep_dir)
    settings = sweep_dir / "sweep.json"
    for content, expect in [('{"device": "cpu",\n  oops}', "sweep.json line 2: not valid JSON"),
                            ("[]", "expected a JSON object of sweep settings, got list"),
                            ('{"evaluation": {"bogus": 1}}', "evaluation must be an object with keys"),
                            ('{"colour": 1}', "unknown setting 'colour'")]:
        settings.write_text(content)
        with pytest.raises(UserError) as e:
            load_settings(sweep_dir)
        assert expect in str(e.value) and "\n" not in str(e.value), str(e.value)
        with pytest.raises(UserError):    # planning again into the folder reads it too
            write_plan(sweep_dir, [])


# --- reproduce --quick keeps and checks explicit names ---------------------------------------------------------

def test_reproduce_quick_keeps_explicit_names_and_checks_them(tmp_path):
    from robustbench_dgsa.jobs.reproduce import QUICK, make_plan
    quick = make_plan(tmp_path / "q", quick=True)
    assert quick.corruptions == list(QUICK["corruptions"]) and quick.text_noise == list(QUICK["text_noise"])
    assert quick.severities == list(QUICK["severities"])
    chosen = make_plan(tmp_path / "c", quick=True, corruptions="contrast,fog", text_noise="char_swap",
                       severities=[5])
    assert chosen.corruptions == ["contrast", "fog"] and chosen.text_noise == ["char_swap"]
    assert chosen.severities == [5] and chosen.rollout_corruptions == ["fog"]
    full = make_plan(tmp_path / "f")
    assert len(full.corruptions) == 19 and full.severities == [1, 2, 3, 4, 5]
    from corruptions.errors import CorruptionError
    with pytest.raises((UserError, CorruptionError), match="unknown corruption 'nope'"):
        make_plan(tmp_path / "n", quick=True, corruptions="nope")
    with pytest.raises((UserError, CorruptionError), match="nope"):
        make_plan(tmp_path / "n", quick=True, text_noise="nope")


# --- the command line -------------------------------------------------------------------------------------------



def test_cli_bad_slurm_and_plan_values_are_one_line(sweep_dir, tmp_path, run_cli_cases):
    new = tmp_path / "new-sweep"
    plan_args = ["sweep", "plan", str(new), "--models", "vit", "--datasets", "synthetic-vision", "--seeds", "0"]
    cases = [
        (["sweep", "slurm", str(sweep_dir), "--time", "bogus"], "--time: expected a Slurm time"),
        (["sweep", "slurm", str(sweep_dir), "--time", "1-24"], "--time: expected a Slurm time"),
        (["sweep", "slurm", str(sweep_dir), "--gpus", "-1"], "--gpus"),
        (["sweep", "slurm", str(sweep_dir), "--cpus", "0"], "--cpus"),
        (["sweep", "slurm", str(sweep_dir), "--mem", "500MB"], "--mem: expected a whole number"),
        (["sweep", "slurm", str(sweep_dir), "--max-parallel", "0"], "--max-parallel"),
        (["sweep", "slurm", str(sweep_dir), "--submitit", "--time", "soon"], "--time: expected a Slurm time"),
        (plan_args + ["--set", "train.epochs=1.5"], "train.epochs: expected an integer ≥ 1, got 1.5"),
        (plan_args + ["--set", "train.nope=1"], "unknown config key 'train.nope'"),
        (plan_args + ["--device", "gpu"], "--device"),
    ]
    results = run_cli_cases([a for a, _ in cases] + [["sweep", "slurm", str(sweep_dir), "--time", "1-12:00:00",
                                                      "--mem", "500M"]])
    for (args, expect), (code, err) in zip(cases, results):
        err = err.strip()
        assert code == 2, (args, err)
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        assert err.startswith("error:") and expect in err, (expect, err)
    assert not new.exists()
    code, err = results[-1]
    assert code == 0, err
    text = (sweep_dir / "slurm" / "sweep.sbatch").read_text()
    assert _sbatch_value(text, "time") == "1-12:00:00" and _sbatch_value(text, "mem") == "500M"
