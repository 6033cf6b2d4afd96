"""Table 2 (ImageNet-1k) on a SLURM cluster, the README's "Scaling out" commands run on a tiny ILSVRC layout
(tests/ilsvrc_layout.py): ``sweep plan`` gives 3 models x 5 seeds with Table 4's configuration (224 px, patch 16,
global batch 64, FFN proj. x4; ``--ffn-ratio 16/3`` for DViT / DGViT only), ``sweep slurm --nodes 2
--gpus-per-node 4`` writes (or, through submitit, submits) one 8-rank DDP job per line, and a missing ImageNet
stops ``sweep plan`` with one line before anything is written.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from ilsvrc_layout import make_ilsvrc   # tests/ilsvrc_layout.py
from robustbench_dgsa.config import validate
from robustbench_dgsa.jobs import slurm
from robustbench_dgsa.jobs.job import job_config
from robustbench_dgsa.jobs.sweep import load_jobs, load_settings

MODELS = ("vit", "dvit", "dgvit")


def _plan_args(sweep: Path, data_root: Path, models: str = "vit,dvit,dgvit", *extra: str) -> list[str]:
    """The README's ``sweep plan`` line for Table 2 (the data root is the fixture)."""
    return ["sweep", "plan", str(sweep), "--model", models, "--dataset", "imagenet", "--preset", "paper",
            "--seed", "0-4", "--data-root", str(data_root), *extra]


@pytest.fixture(scope="module")
def imagenet(tmp_path_factory) -> Path:
    return make_ilsvrc(tmp_path_factory.mktemp("data") / "imagenet", flat=True)


@pytest.fixture()
def table2(tmp_path, imagenet, run_main) -> Path:
    code, out, err = run_main(_plan_args(tmp_path / "runs" / "table2", imagenet), tmp_path)
    assert code == 0, err
    assert out.strip() == f"15 jobs in {tmp_path / 'runs' / 'table2' / 'jobs.jsonl'} (15 from this plan)"
    return tmp_path / "runs" / "table2"


def _configs(sweep: Path) -> dict[tuple[str, int], object]:
    settings = load_settings(sweep)
    return {(j.model, j.seed): job_config(j, device=settings["device"], data_root=settings["data_root"])
            for j in load_jobs(sweep)}


def test_the_plan_is_3_models_by_5_seeds_in_table_4s_configuration(table2, imagenet):
    jobs = load_jobs(table2)
    assert [(j.model, j.seed) for j in jobs] == [(m, s) for m in MODELS for s in range(5)]
    assert {(j.dataset, j.preset) for j in jobs} == {("imagenet", "paper")} and all(not j.overrides for j in jobs)
    assert load_settings(table2)["data_root"] == str(imagenet.resolve())
    for (model, seed), cfg in _configs(table2).items():
        assert (cfg.model.image_size, cfg.model.patch_size, cfg.train.batch_size) == (224, 16, 64), model
        assert (cfg.model.ffn_ratio, cfg.model.ffn_dropout2) == (4.0, True), model
        assert (cfg.train.epochs, cfg.model.dim, cfg.model.depth) == (100, 256, 8), model
        assert cfg.model.ffn == ("gelu" if model == "vit" else "swiglu")
        assert cfg.data.dataset == "imagenet" and cfg.data.data_root == str(imagenet.resolve())
        validate(cfg, data_modality="image", processes=8)   # what each of the 8 ranks checks before training


def test_the_16_3_plan_widens_only_the_swiglu_models(tmp_path, imagenet, run_main):
    wide = tmp_path / "runs" / "table2-16-3"
    code, out, err = run_main(_plan_args(wide, imagenet, "dvit,dgvit", "--ffn-ratio", "16/3"), tmp_path)
    assert code == 0 and out.startswith("10 jobs in"), err
    cfgs = _configs(wide)
    assert sorted(cfgs) == [(m, s) for m in ("dgvit", "dvit") for s in range(5)]
    assert all(c.model.ffn_ratio == pytest.approx(16 / 3) and c.model.image_size == 224 for c in cfgs.values())
    # --ffn-ratio with ViT in the list leaves ViT at x4 (one row in Table 2; --set would widen its GELU FFN too)
    both = tmp_path / "runs" / "both"
    assert run_main(_plan_args(both, imagenet, "vit,dvit,dgvit", "--ffn-ratio", "16/3"), tmp_path)[0] == 0
    ratios = {(m, round(c.model.ffn_ratio * 3, 9)) for (m, _), c in _configs(both).items()}   # 3 x ratio
    assert ratios == {("vit", 12), ("dvit", 16), ("dgvit", 16)}
    assert all(not j.overrides for j in load_jobs(both) if j.model == "vit")


def _directives(text: str) -> dict[str, str]:
    return dict(ln[len("#SBATCH --"):].partition("=")[::2] for ln in text.splitlines()
                if ln.startswith("#SBATCH --"))


def test_sweep_slurm_two_nodes_by_four_gpus_script(table2, run_main):
    code, out, err = run_main(["sweep", "slurm", str(table2), "--nodes", "2", "--gpus-per-node", "4"], table2.parent)
    assert code == 0, err
    script = table2 / "slurm" / "sweep.sbatch"
    assert out.startswith(f"wrote {script.resolve()}; submit with: sbatch ")
    d = _directives(script.read_text())
    assert (d["nodes"], d["ntasks-per-node"], d["gpus-per-node"], d["array"]) == ("2", "4", "4", "0-14")
    srun = [ln for ln in script.read_text().splitlines() if ln.startswith("srun ")]
    assert len(srun) == 1 and srun[0].endswith(f'sweep run-one {table2.resolve()} --index "$SLURM_ARRAY_TASK_ID"')


def test_sweep_slurm_submitit_submits_15_eight_rank_jobs(table2, run_main, monkeypatch):
    """The README's ``--submitit`` line: submitit's executor (faked: no cluster here) gets 2 nodes x 4 tasks x 4
    GPUs and every line of jobs.jsonl, each task one rank (:func:`slurm.run_one_rank`)."""
    submitit = pytest.importorskip("submitit")
    seen: dict = {}

    class FakeExecutor:
        def __init__(self, folder: str) -> None:
            seen["folder"] = folder

        def update_parameters(self, **params) -> None:
            seen["params"] = params

        def map_array(self, fn, dirs, indices):  # noqa: ANN001 - submitit's signature
            seen.update(fn=fn, dirs=dirs, indices=indices)
            return [type("Job", (), {"job_id": f"100_{i}"})() for i in indices]

    monkeypatch.setattr(submitit, "AutoExecutor", FakeExecutor)
    code, out, err = run_main(["sweep", "slurm", str(table2), "--nodes", "2", "--gpus-per-node", "4", "--submitit"],
                              table2.parent)
    assert code == 0, err
    assert out.startswith("submitted 15 jobs: 100_0, 100_1") and seen["indices"] == list(range(15))
    p = seen["params"]
    assert (p["nodes"], p["tasks_per_node"], p["gpus_per_node"]) == (2, 4, 4)
    assert seen["fn"] is slurm.run_one_rank and set(seen["dirs"]) == {str(table2.resolve())}


@pytest.mark.parametrize("exists", [False, True])
def test_missing_imagenet_stops_sweep_plan_with_one_line(tmp_path, run_main, exists):
    empty = tmp_path / "data"
    empty.mkdir()
    sweep = tmp_path / "runs" / "table2"
    if exists:
        sweep.mkdir(parents=True)
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    code, out, err = run_main(_plan_args(sweep, empty), tmp_path)
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert code == 2 and len(errors) == 1 and "Traceback" not in err, err
    assert "train/<wnid>/*.JPEG" in errors[0] and str(empty.resolve()) in errors[0] and out == ""
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before   # nothing written


def test_a_bad_ffn_ratio_names_the_flag(tmp_path, imagenet, run_main):
    code, _, err = run_main(_plan_args(tmp_path / "w", imagenet, "vit", "--ffn-ratio", "0"), tmp_path)
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert code == 2 and len(errors) == 1 and errors[0].startswith("error: --ffn-ratio 0 is not a valid FFN ratio")
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize("env,affinity,world,expected", [
    ({"SLURM_STEP_NUM_TASKS": "8", "SLURM_CPUS_PER_TASK": "8", "SLURM_NTASKS_PER_NODE": "4"}, 8, 8, 8),  # bound
    ({"SLURM_STEP_NUM_TASKS": "8", "SLURM_CPUS_PER_TASK": "8", "SLURM_NTASKS_PER_NODE": "4"}, 32, 8, 8),  # shared
    ({"SLURM_STEP_NUM_TASKS": "8", "SLURM_CPUS_PER_TASK": "2", "SLURM_NTASKS_PER_NODE": "4"}, 8, 8, 2),
    ({"LOCAL_WORLD_SIZE": "4", "WORLD_SIZE": "8"}, 32, 8, 8),      # torchrun, 2 nodes x 4
    ({}, 16, 8, 2),                                                # one machine, 8 processes
])
def test_each_rank_of_a_slurm_job_decodes_with_its_own_cpus(monkeypatch, env, affinity, world, expected):
    """The default DataLoader workers of one rank: the CPUs srun gave this task (``--cpus-per-task``), not
    those CPUs divided by all 8 ranks of the job."""
    from robustbench_dgsa.engine import streaming
    monkeypatch.setattr(streaming.os, "sched_getaffinity", lambda pid: set(range(affinity)), raising=False)
    assert streaming.default_workers(world, env) == expected
