"""``dgsa-bench evaluate --threat-model linf|l2|<registered>`` (issue 36): evaluate's options -> the adversarial job -> a table
or JSON. Kept beside ``evaluate_cmd.py`` so that module stays within its line budget."""
from __future__ import annotations

from typing import Any, Callable

from robustbench_dgsa.util.errors import UserError
from . import options as opt
from .render import echo_json


def evaluate_adversarial_command(o: dict[str, Any], evaluated_checkpoint: Callable[..., Any],
                                 check_external_options: Callable[..., None]) -> None:
    """--threat-model other than corruptions: evaluate's options ``o`` -> jobs.adversarial.evaluate_adversarial -> table or JSON
    (``evaluated_checkpoint`` / ``check_external_options``: evaluate's own checks of the model options)."""
    from robustbench_dgsa.jobs.adversarial import evaluate_adversarial
    if o["threat_model"].strip().lower() == "corruptions":
        raise UserError("--eps, --attack, --eps-ladder and --min-norm go with --threat-model linf, l2 or a "
                        "registered threat model")
    if o["corruption"] is not None or o["severity"] is not None or o["text_noise"] is not None:
        raise UserError("--corruption, --severity and --text-noise go with --threat-model corruptions")
    opt.check_data_root(o["data_root"])
    checkpoint, store = evaluated_checkpoint(o["checkpoint"], o["pretrained"], o["timm_name"], o["module"],
                                              o["store"])
    check_external_options(o["timm_name"], o["module"], o["weights"], o["random_init"], o["name"],
                            o["model_args"], o["timm_norm"], o["seed"], o["dataset"])
    if o["timm_name"] is not None or o["module"] is not None:
        store = store if store is not None else opt.DEFAULT_STORE
    run = evaluate_adversarial(checkpoint, timm_name=o["timm_name"], module=o["module"], weights=o["weights"],
                               random_init=o["random_init"], init_seed=opt.parse_one_seed(o["seed"] or "0"),
                               name=o["name"], model_args=opt.parse_model_args(o["model_args"]),
                               timm_norm=o["timm_norm"], dataset=o["dataset"], data_root=o["data_root"],
                               max_test=o["max_examples"], threat_model=o["threat_model"], eps=o["eps"],
                               attack=o["attack"], ladder=o["eps_ladder"], min_norm=o["min_norm"],
                               attack_seed=o["attack_seed"], store=store, batch_size=o["batch_size"],
                               device=o["device"])
    _render_adversarial(run, o["json_"])


def _render_adversarial(run: Any, json_: bool) -> None:
    rows = run.table()
    if json_:
        echo_json({"run_id": run.run_id, "store": str(run.store_dir), "model": run.model, "rows": rows,
                   "seconds": run.seconds}, nonfinite="null")
        return
    from rich.table import Table
    from .render import console
    t = Table(title=f"adversarial evaluation {run.run_id} ({run.model})")
    for col in ("threat model", "eps", "attack", "clean acc", "robust acc / median norm", "n"):
        t.add_column(col)
    for r in rows:
        eps = "" if r["eps"] != r["eps"] else f"{r['eps']:.6g} ({255 * r['eps']:.3g}/255)"
        clean = "" if r["clean_acc"] != r["clean_acc"] else f"{r['clean_acc']:.4f}"
        t.add_row(r["threat_model"], eps, r["attack"], clean, f"{r['robust_acc']:.4f}", str(r["n"]))
    console().print(t)
