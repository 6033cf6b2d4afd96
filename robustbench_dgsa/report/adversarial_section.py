"""The report's "Adversarial robustness" section (only when the store holds ``kind: adversarial`` rows):
accuracy vs eps per model with seed bands (95 % t-interval) and a table with CIs and the median minimal
perturbation. The adversarial claims are registered claims: their tests and verdicts are in the Findings, with
every other claim's. Every number is labelled with the attack that produced it (APGD-CE + APGD-T below 8/255 is
not AutoAttack)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from matplotlib.figure import Figure

from robustbench_dgsa.analysis import adversarial as A
from robustbench_dgsa.models.registry import model_order
from robustbench_dgsa.report.labels import dataset_label, display_name
from robustbench_dgsa.report.tables import Table, fmt_num

if TYPE_CHECKING:
    from robustbench_dgsa.report.artefacts import Report

SECTION = "adversarial"
ATTACK_NAMES = {"autoattack": "AutoAttack", "apgd-ce": "APGD-CE", "apgd-ce+apgd-t": "APGD-CE+APGD-T",
                "none": "clean", "own": "the threat model's own attack"}


def adversarial_section(rep: Report) -> None:
    rows = A.adversarial_accuracy(rep.df)
    if rows.empty:
        return                                     # no section at all (not even a "skipped" line)
    acc = A.accuracy_vs_eps(rep.df)
    for (ds, tm), part in acc.groupby(["dataset", "threat_model"]):
        raw = rows[(rows["dataset"] == ds) & (rows["condition"] == tm)]
        _figure(rep, ds, tm, part, raw)
        _table(rep, ds, tm, part, raw)


def threat_model_label(condition: str) -> str:
    """A stored condition's threat-model name from the registry (``linf`` -> ``Linf``); the condition itself when
    no loaded plugin registers it (a report built where the plugin is absent)."""
    from robustbench_dgsa.engine.threat_models import get_threat_model
    from robustbench_dgsa.util.errors import UserError
    try:
        return get_threat_model(condition).name
    except UserError:
        return condition


def _attacks_note(raw, tm: str) -> str:
    """Which attack made each eps's numbers (from the rows), and that APGD alone is not AutoAttack where used."""
    steps = dict.fromkeys(f"{_eps_label(e, tm)}: {ATTACK_NAMES.get(a, a)}"
                          for e, a in sorted(set(zip(raw["eps"], raw["attack"]))) if e == e)
    note = f"Attack per eps: {', '.join(steps)}."
    if set(raw["attack"]) & {"apgd-ce", "apgd-ce+apgd-t"}:
        note += " APGD-CE / APGD-CE+APGD-T are AutoAttack's first attacks only, not full AutoAttack."
    return note


def _eps_label(eps: float, tm: str) -> str:
    return f"{255 * eps:g}/255" if tm == "linf" else f"{eps:g}"


def _figure(rep: Report, ds: str, tm: str, part, raw) -> None:
    fig = Figure(figsize=(5.0, 3.4))
    ax = fig.add_subplot(111)
    for m in model_order(part["model"]):
        g = part[part["model"] == m].sort_values("eps")
        x = 255 * g["eps"] if tm == "linf" else g["eps"]
        ax.plot(x, 100 * g["mean"], marker="o", label=display_name(m))
        ok = g["ci_lo"].notna()
        ax.fill_between(x[ok], 100 * g["ci_lo"][ok], 100 * g["ci_hi"][ok], alpha=0.2)
    ax.set_xlabel("eps (×1/255, pixel units)" if tm == "linf" else f"eps ({threat_model_label(tm)}, pixel units)")
    ax.set_ylabel("robust accuracy (%)")
    ax.legend(fontsize=8)
    title = f"Adversarial robustness: {dataset_label(ds)}, {threat_model_label(tm)}"
    rep.figure(SECTION, f"adversarial_{ds}_{tm}", title, fig, raw,
               caption=f"Mean over training seeds, band: 95 % t-interval over seeds. {_attacks_note(raw, tm)}")


def _table(rep: Report, ds: str, tm: str, part, raw) -> None:
    cols = ["Model", "eps", "Attack", "Seeds", "n", "Robust acc. (%)", "95% CI"]
    recs = []
    for m in model_order(part["model"]):
        for r in part[part["model"] == m].sort_values("eps").itertuples():
            ci = "—" if r.ci_lo != r.ci_lo else f"[{fmt_num(100 * r.ci_lo)}, {fmt_num(100 * r.ci_hi)}]"
            recs.append([display_name(m), _eps_label(r.eps, tm), ATTACK_NAMES.get(r.attack, r.attack),
                         str(r.n_seeds), str(r.n), fmt_num(100 * r.mean), ci])
    notes = ["Robust accuracy = accuracy on the attacked images (eps in pixel units of [0, 1] images for every "
             "model); APGD-CE / APGD-CE+APGD-T are AutoAttack's first attacks only, weaker than AutoAttack.",
             "Claims about these numbers (registered with their eps and attack) are tested in the Findings, "
             "one verdict each."]
    mn = A.min_norm_summary(rep.df)
    mn = mn[(mn["dataset"] == ds) & (mn["threat_model"] == tm)]
    for r in mn.itertuples():
        notes.append(f"{display_name(r.model)}: median minimal perturbation (FAB) {_eps_label(r.mean, tm)} "
                     f"(mean over {r.n_seeds} seed(s)).")
    title = f"Adversarial accuracy: {dataset_label(ds)}"
    rep.table(SECTION, f"adversarial_{ds}_{tm}_table", title, Table(cols, recs, title, notes), raw)
