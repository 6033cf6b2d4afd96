"""``dgsa-bench evaluate``: options -> :func:`robustbench_dgsa.jobs.evaluation.evaluate_model` -> table or JSON."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from robustbench_dgsa.util.errors import UserError
from . import options as opt
from .app import app
from .render import echo_json


def _check_store_links(store: Optional[Path], checkpoint: Optional[Path]) -> None:
    """The store evaluate writes into (--store, else <checkpoint folder>/store) holds no symbolic link."""
    default = checkpoint.parent / "store" if checkpoint is not None else None
    if store is None and default is not None and default.is_symlink():
        raise UserError(f"{default} (the default results store) is a symbolic link; give --store DIR or remove "
                        f"the link")
    if store is None and default is not None:
        opt.check_no_links(default, "--store")


# --threat-model linf|l2|... (issue 36): declared here so evaluate_command's signature stays short
_THREAT_MODEL = typer.Option("corruptions", "--threat-model", help="corruptions (default), linf, l2 or a threat "
                             "model a plugin registers (register_threat_model): its attack (linf/l2: AutoAttack, "
                             "pyautoattack 0.2.0, the \\[adversarial] extra) on the first --max-examples (default "
                             "1000) test images, eps in pixel units.")
_EPS = typer.Option(None, "--eps", help="linf/l2 radius in pixel units ([0, 1] images; default RobustBench's 8/255 "
                    "/ 0.5 on CIFAR, 4/255 on ImageNet).")
_ATTACK = typer.Option(None, "--attack", help="linf/l2: autoattack (standard version; default), apgd-ce or "
                       "apgd-ce+apgd-t (AutoAttack's first attack(s) only: quicker, weaker; labelled so); a "
                       "plugin's threat model: own (its own attack; default).")
_EPS_LADDER = typer.Option(False, "--eps-ladder", help="The threat model's eps ladder instead of one --eps (linf: "
                           "0, 0.5, 1, 2, 4/255 with APGD-CE + APGD-T and 8/255 with AutoAttack; l2 has none).")
_MIN_NORM = typer.Option(False, "--min-norm", help="Also FAB's minimal perturbation per image (median stored).")
_ATTACK_SEED = typer.Option(0, "--attack-seed", min=0, max=opt.SEED_MAX, help="The attack's seed (AutoAttack's "
                            "for linf/l2).")


@app.command("evaluate")
def evaluate_command(  # long: its Typer signature declares 36 options; the body is under 40 lines
    checkpoint: Optional[Path] = opt.checkpoint(None, help="checkpoint.safetensors written by train (or use "
                                                             "--pretrained / --timm / --module)."),
    pretrained: Optional[str] = opt.pretrained(help="Instead of --checkpoint: a shipped trained model (see "
                                                    "`dgsa-bench models --pretrained`), by entry name "
                                                    "(dgvit-cifar10) or bare model name (dgvit)."),
    dataset: Optional[str] = opt.dataset(None, help="Default: the checkpoint's dataset."),
    data_root: Optional[Path] = typer.Option(None, "--data-root", help="Folder holding the dataset files."),
    corruption: Optional[str] = opt.corruption(),
    severity: Optional[str] = opt.severity(),
    corruption_dir: Optional[Path] = typer.Option(
        None, "--corruption-dir", help="Official or regenerated CIFAR-C folder (<corruption>.npy + labels.npy) or "
                                       "ImageNet-C-style tree (<corruption>/<severity>/<wnid>/); default: on-the-fly."),
    corruption_seed: int = typer.Option(0, "--corruption-seed", min=0, max=opt.SEED_MAX,
                                        help="Seed of on-the-fly corruptions / text noise."),
    frost_dir: Optional[Path] = typer.Option(None, "--frost-dir",
                                             help="Frost photographs for on-the-fly frost (default: "
                                                  "<data-root>/corruptions/frost when present)."),
    text_noise: Optional[str] = opt.text_noise(),
    max_examples: Optional[int] = opt.max_examples(help="Use N test examples (which: --subset)."),
    subset: Optional[str] = typer.Option(None, "--subset", help="Which --max-examples test examples: first (the "
                                         "first N in official order, as RobustBench's n_examples; default), "
                                         "stratified (class-stratified, seed 0) or auto (the first N unless they "
                                         "miss a class). A checkpoint evaluated on its own dataset keeps its run's "
                                         "choice."),
    split: str = typer.Option("test", "--split", help="test (default), train, or a dataset's own split such as "
                                                      "test-exact (cifar10: the 1,017 exact-pixel test images)."),
    store: Optional[Path] = typer.Option(None, "--store", help="Results store (default: <checkpoint folder>/store; "
                                         f"for --pretrained / --timm / --module: {opt.DEFAULT_STORE})."),
    batch_size: int = typer.Option(256, "--batch-size", min=1, max=opt.config_max("train.batch_size"),
                                   help="Evaluation batch size."),
    device: str = opt.device(),
    json_: bool = opt.json_(),
    quiet: bool = opt.quiet(),
    timm_name: Optional[str] = opt.timm(),
    module: Optional[str] = typer.Option(None, "--module", help="Instead of --checkpoint: pkg.mod:factory, a "
                                         "function returning an nn.Module (its input: images in [0, 1])."),
    weights: Optional[Path] = opt.weights(),
    random_init: bool = opt.random_init(),
    seed: Optional[str] = opt.seed(None, help="Seed of the --random-init weights (default 0; recorded and put "
                                              "into the model's name)."),
    timm_norm: bool = opt.timm_norm(),
    name: Optional[str] = typer.Option(None, "--name", help="Model name in the store for --timm/--module "
                                       "(default: the timm name or factory, plus -random-init-s<seed>; the weights "
                                       "hash is appended when the store holds that name for other weights)."),
    model_args: Optional[str] = opt.model_args(),
    train_seed: Optional[int] = typer.Option(None, "--train-seed", min=0, max=opt.SEED_MAX,
                                             help="For --timm / --module: the seed these weights were trained with; "
                                                  "several trained seeds under one --name are one model with n "
                                                  "seeds in compare and report."),
    amp: Optional[str] = opt.amp("Default: the checkpoint's train.amp (auto for --timm/--module)."),
    compile_model: bool = opt.compile_(),
    threat_model: str = _THREAT_MODEL, eps: Optional[float] = _EPS, attack: Optional[str] = _ATTACK,
    eps_ladder: bool = _EPS_LADDER, min_norm: bool = _MIN_NORM, attack_seed: int = _ATTACK_SEED,
) -> None:
    """Accuracy of a checkpoint (or of a timm / any importable model): clean, per corruption and severity, and
    under text noise (into the store); with --threat-model linf|l2 (or a plugin's), robust accuracy under attack."""
    from robustbench_dgsa.jobs.evaluation import evaluate_model, result_summary

    if threat_model.strip().lower() != "corruptions" or eps is not None or eps_ladder or min_norm \
            or attack is not None:
        from .evaluate_adversarial import evaluate_adversarial_command
        evaluate_adversarial_command(locals(), _evaluated_checkpoint, _check_external_options)
        return
    corruptions = opt.parse_corruptions(corruption)
    severities = opt.parse_severities(severity)
    noise = opt.parse_text_noise(text_noise)
    opt.check_data_root(data_root)
    opt.check_corruption_dir(corruption_dir)
    checkpoint, store = _evaluated_checkpoint(checkpoint, pretrained, timm_name, module, store)
    _check_external_options(timm_name, module, weights, random_init, name, model_args, timm_norm, seed, dataset)
    if timm_name is not None or module is not None:
        store = store if store is not None else opt.DEFAULT_STORE
    res = evaluate_model(checkpoint, timm_name=timm_name, module=module, weights=weights, random_init=random_init,
                         init_seed=opt.parse_one_seed(seed or "0"), name=name,
                         model_args=opt.parse_model_args(model_args), timm_norm=timm_norm, dataset=dataset,
                         data_root=data_root, split=split, max_test=max_examples, subset=subset,
                         corruptions=corruptions, severities=severities, corruption_dir=corruption_dir,
                         text_noise=noise, corruption_seed=corruption_seed, store=store, batch_size=batch_size,
                         device=device, progress=not quiet, frost_dir=frost_dir, train_seed=train_seed, amp=amp,
                         compile_model=compile_model)
    if json_:
        echo_json({"checkpoint": str(checkpoint or timm_name or module), "store": str(res.store_dir),
                   **result_summary(res)}, nonfinite="null", sort_keys=True)
    else:
        _print_eval_table(res)


def _check_external_options(timm_name: Optional[str], module: Optional[str], weights: Optional[Path],
                            random_init: bool, name: Optional[str], model_args: Optional[str], timm_norm: bool,
                            seed: Optional[str], dataset: Optional[str]) -> None:
    """The options that go with --timm / --module only, and what those two need."""
    if timm_name is None and module is None:
        if weights is not None or random_init or name is not None or model_args or timm_norm or seed is not None:
            raise UserError("--weights, --random-init, --seed, --timm-norm, --name and --model-args go with --timm "
                            "or --module, not --checkpoint / --pretrained")
        return
    if seed is not None and not random_init:
        raise UserError("--seed goes with --random-init (the seed of the random weights)")
    opt.parse_one_seed(seed or "0")
    opt.parse_model_args(model_args)
    if dataset is None:
        raise UserError("--timm/--module need --dataset (the model carries no training dataset)")
    if module is not None and random_init:
        raise UserError("--random-init goes with --timm (a --module factory builds its own weights)")


def _evaluated_checkpoint(checkpoint: Optional[Path], pretrained: Optional[str], timm_name: Optional[str],
                          module: Optional[str], store: Optional[Path]) -> tuple[Optional[Path], Optional[Path]]:
    """Exactly one model option; --pretrained NAME becomes the shipped checkpoint, its store the default one; the
    store folder checked (no links inside)."""
    if sum(x is not None for x in (checkpoint, pretrained, timm_name, module)) != 1:
        raise UserError("give exactly one of --checkpoint, --pretrained, --timm or --module")
    if pretrained is not None:
        from robustbench_dgsa.models.zoo import pretrained_checkpoint
        checkpoint = pretrained_checkpoint(pretrained.strip())[1]
        store = store if store is not None else opt.DEFAULT_STORE  # never a folder inside the installed package
    opt.check_output_dir(store, "--store", store=True)
    if store is None and checkpoint is not None:  # the default store beside the checkpoint: not inside another
        opt.check_outputs({}, {"--store": checkpoint.parent / "store"})
    _check_store_links(store, checkpoint)
    return checkpoint, store


def _print_eval_table(res: Any) -> None:
    from rich.console import Console
    from rich.table import Table
    examples = getattr(res, "examples", "")
    t = Table(title=f"evaluation {res.run_id}" + (f" ({examples} test examples)" if examples else ""))
    for col in ("condition", "severity", "accuracy", "n", "cer", "wer", "source"):
        t.add_column(col)
    for r in res.table.itertuples(index=False):
        fmt = lambda v: "" if v != v else f"{v:.4f}"  # noqa: E731 - NaN -> blank
        src = r.source if len(r.source) <= 32 else r.source[:31] + "…"
        t.add_row(r.condition, str(r.severity), f"{r.accuracy:.4f}", str(r.n), fmt(r.cer), fmt(r.wer), src)
    Console().print(t)  # a result table: stdout
    from robustbench_dgsa.jobs.evaluation import imagenet_c_mce
    mce = imagenet_c_mce(res)
    if mce:
        value = f"{mce['mCE']:.2f}%" if mce["mCE"] is not None else f"n/a (missing: {mce['missing']})"
        Console(highlight=False).print(f"ImageNet-C mCE (AlexNet-normalised): {value}; mCA {100 * mce['mCA']:.2f}% "
                                       f"over {mce['n_corruptions']} of the 15 corruptions")

