"""The claim registry: every sentence of the paper the suite tests, as data the report reads.

A :class:`Claim` is one testable statement: the paper's sentence (quoted, with its table or figure), the two models
it compares, the measure (a named *statistic* over accuracy cells, computed per seed), the direction, the family it
is corrected in, primary or secondary, and ``operationalisation``: how the sentence's vague words become a test,
written down here **before** the results were looked at. One claim has one primary test and one verdict
(:mod:`robustbench_dgsa.analysis.verdicts`); anything else shown about it is a labelled sensitivity analysis.

Statistics (per seed s, Δ_c,s = mean over the claim's severities of acc_model − acc_baseline on condition c, in
accuracy points; "the corruptions" = the claim's ``conditions``):

* ``mean``: mean over the claim's cells of acc_model − acc_baseline (clean accuracy, mCA, mNA, one corruption);
* ``retention``: mean_cells(acc_model)/clean_model − mean_cells(acc_baseline)/clean_baseline (points of clean kept);
* ``relative_mce``: 100 · (mean_c Σ_sev err_model / Σ_sev err_baseline − 1): the model's corruption error relative
  to the baseline's, minus 100 % (negative = fewer errors);
* ``kth_smallest_gain``: the k-th smallest Δ_c (k = 1: the smallest; "positive on at least 13 of 15" ⇔ the 3rd
  smallest of 15 is > 0);
* ``named_minus_median``: mean Δ_c over ``named`` − median Δ_c over the other conditions;
* ``named_min_minus_max``: min Δ_c over ``named`` − max Δ_c over the other conditions (> 0 ⇔ every named condition
  gains more than every other one).

Direction: ``greater`` / ``less`` (than ``threshold``, points) or ``equivalent`` (|mean| < ``margin``: a TOST).

Threat-model claims (``eps`` set): the conditions are threat models (``linf``, a plugin's), and a cell is the robust
accuracy at ``eps`` under ``attack`` (the store's ``kind: adversarial`` rows; the run's eps-0 step is the clean
cell), severities ``(0,)``; the statistics are the same.

Claims come from :data:`BUILTIN` (registered through :func:`register`, the same function a user's claims go
through) and from ``<store>/claims.toml`` (:func:`load_user_claims`), a list of ``[[claim]]`` tables with the
fields of :class:`Claim`.
"""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from robustbench_dgsa.analysis.metrics import BENCHMARK_CORRUPTIONS
from robustbench_dgsa.util.errors import UserError

STATISTICS = ("mean", "retention", "relative_mce", "kth_smallest_gain", "named_minus_median", "named_min_minus_max")
DIRECTIONS = ("greater", "less", "equivalent")
#: condition keywords: every benchmark corruption (images) / every noise type (text) of the dataset
BENCHMARK, NOISE = "benchmark", "noise"
NOT_CLAIMED = "not claimed by the paper"
CLAIMS_FILE = "claims.toml"


@dataclass(frozen=True)
class Claim:
    """One testable statement (see the module docstring for ``statistic`` and ``direction``)."""

    id: str
    quote: str                      # the paper's sentence, verbatim ("" for a measure the paper does not claim)
    source: str                     # "Table 1", "Figure 4a", NOT_CLAIMED
    dataset: str
    model: str
    baseline: str
    statistic: str
    conditions: tuple[str, ...] = ("clean",)
    severities: tuple[int, ...] = (0,)
    direction: str = "greater"
    threshold: float = 0.0          # points; the claimed side of it
    margin: float = 1.0             # points; equivalence only
    k: int = 1
    named: tuple[str, ...] = ()
    family: str = ""
    primary: bool = True
    operationalisation: str = ""
    label: str = ""                 # short row label
    testable: str = ""              # non-empty: why it cannot be tested here
    eps: float | None = None        # a threat-model claim: the radius (pixel units) its cells are measured at
    attack: str = ""                # ... and the attack that measured them (the rows' ``attack``)

    @property
    def claimed(self) -> bool:
        return self.source != NOT_CLAIMED


@dataclass
class Registry:
    """Claims in registration order; ids unique."""

    claims: list[Claim] = field(default_factory=list)

    def register(self, claim: Claim) -> Claim:
        return register(claim, self)


def _check(c: Claim) -> None:
    """A claim the statistics can run, or a neutral error naming the field."""
    if c.statistic not in STATISTICS:
        raise UserError(f"claim {c.id!r}: statistic {c.statistic!r} is not one of {', '.join(STATISTICS)}")
    if c.direction not in DIRECTIONS:
        raise UserError(f"claim {c.id!r}: direction {c.direction!r} is not one of {', '.join(DIRECTIONS)}")
    if not c.id or not c.dataset or not c.model or not c.baseline:
        raise UserError(f"claim {c.id!r}: id, dataset, model and baseline are required")
    if c.direction == "equivalent" and not c.margin > 0:
        raise UserError(f"claim {c.id!r}: an equivalence claim needs a margin > 0")
    if c.statistic == "kth_smallest_gain" and c.k < 1:
        raise UserError(f"claim {c.id!r}: k must be >= 1")
    if c.statistic.startswith("named") and not c.named:
        raise UserError(f"claim {c.id!r}: statistic {c.statistic} needs 'named' conditions")
    if c.eps is not None:
        _check_threat_claim(c)


def _check_threat_claim(c: Claim) -> None:
    if isinstance(c.eps, bool) or not isinstance(c.eps, (int, float)) or not math.isfinite(c.eps) or c.eps <= 0:
        raise UserError(f"claim {c.id!r}: eps must be a number > 0, got {c.eps!r}")
    if not c.attack:
        raise UserError(f"claim {c.id!r}: a threat-model claim names the attack its cells come from")
    if tuple(c.severities) != (0,) or not c.conditions or {BENCHMARK, NOISE, "clean"} & set(c.conditions):
        raise UserError(f"claim {c.id!r}: a threat-model claim's conditions are threat models (e.g. linf) at "
                        "severity 0")


def register(claim: Claim, registry: Registry | None = None) -> Claim:
    """Add ``claim`` to ``registry`` (default: the built-in one) after checking it; an id already there is
    refused (a claim has one test and one verdict)."""
    reg = BUILTIN if registry is None else registry
    _check(claim)
    if any(c.id == claim.id for c in reg.claims):
        raise UserError(f"claim {claim.id!r} is registered twice")
    reg.claims.append(claim)
    return claim


def load_user_claims(path: str | Path, registry: Registry) -> list[Claim]:
    """Register the ``[[claim]]`` tables of a TOML file into ``registry``; a missing file adds nothing."""
    path = Path(path)
    if not path.is_file():
        return []
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{path.name}: not valid TOML ({e})") from None
    names = {f.name for f in fields(Claim)}
    out = []
    for i, raw in enumerate(data.get("claim", [])):
        if not isinstance(raw, dict):
            raise UserError(f"{path.name}: claim {i + 1} is not a table")
        extra = sorted(set(raw) - names)
        if extra:
            raise UserError(f"{path.name}: claim {raw.get('id', i + 1)!r}: unknown field(s) {', '.join(extra)}")
        kw: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()}
        kw.setdefault("family", f"{kw.get('dataset', '')} · user claims")
        kw.setdefault("source", "user claim")
        kw.setdefault("quote", "")
        try:
            claim = Claim(**kw)
        except TypeError as e:
            raise UserError(f"{path.name}: claim {raw.get('id', i + 1)!r}: {e}") from None
        out.append(register(claim, registry))
    return out


def claims_for_store(store_dir: str | Path | None) -> Registry:
    """The built-in claims plus the store's ``claims.toml`` (if any), in a new registry."""
    reg = Registry(list(BUILTIN.claims))
    if store_dir is not None:
        load_user_claims(Path(store_dir) / CLAIMS_FILE, reg)
    return reg


def generic_claims(registry: Registry, dataset: str, models: set[str]) -> list[Claim]:
    """The paper's two generic claims (clean accuracy, Tables 1 / 3; robustness, the abstract) for a dataset no
    registered claim names, for each (gated model, baseline) pair present (synthetic data then gets "no claim")."""
    out = []
    for dg, base, table, robust in (("dgvit", "vit", "Table 1", BENCHMARK), ("dgvit", "dvit", "Table 1", BENCHMARK),
                                    ("dgt", "transformer", "Table 3", NOISE), ("dgt", "dt", "Table 3", NOISE)):
        if not {dg, base} <= models:
            continue
        fam = f"{dataset} · primary"
        out.append(register(Claim(f"{dataset}:clean:{base}", _CAPTIONS[table],
                                  table, dataset, dg, base, "mean", family=fam, label="clean accuracy",
                                  operationalisation="clean test accuracy higher"), registry))
        out.append(register(Claim(f"{dataset}:robust:{base}", _TEXT, "Abstract", dataset, dg, base, "mean",
                                  (robust,), _SEV, family=fam,
                                  label="mCA" if robust == BENCHMARK else "mNA",
                                  operationalisation="'robustness gains' = mean corrupted / noisy accuracy "
                                                     "over severities 1–5 higher"), registry))
    return out


# ------------------------------------------------------------------------------------------------ built-in
BUILTIN = Registry()
#: the CIFAR-100-C sentences (Figure 4b): no CIFAR-100 data here
NOT_TESTABLE_HERE = (
    ("Figure 4b", "On CIFAR-100-C (Fig. 4b), where robustness is significantly more challenging due to the "
     "increased label space and lower clean accuracy, the same pattern holds."),
    ("Figure 4b", "Our method outperforms both baselines across almost all corruptions, including the hardest ones "
     "(fog, frost, contrast), while maintaining competitive performance even in the few cases - such as impulse "
     "noise - where the Vanilla model shows a slight advantage."),
)
NOT_TESTABLE_REASON = "not testable here: no CIFAR-100 data"

_FIG4 = ("Across both CIFAR-10-C and CIFAR-100-C, our method provides consistent, corruption-agnostic robustness "
         "improvements over both the Vanilla and DT baselines.")
_NEARLY = "On CIFAR-10-C (Fig. 4a), our model achieves higher accuracy for nearly all corruption types"
_STRONG = ("with particularly strong gains on noise (Gaussian, Shot), blur (Defocus, Motion, Zoom), weather effects "
           "(Snow, Frost), and compression artifacts (JPEG).")
_LARGEST = "The largest improvements occur under severe global distribution shifts, such as fog and contrast"
_IMP_LOW = "We note that Vanilla performs marginally better on impulse_noise at low severities"
_IMP_HIGH = "however, this difference is extremely small and disappears at higher severities."
_ONLY = "Importantly, impulse noise is the only corruption where the baseline is competitive"
_TEXT = ("We evaluate on both vision and language benchmarks, demonstrating consistent robustness gains over "
         "vanilla Transformer, Vision Transformer, and Differential Transformer baselines.")
_CAPTIONS = {"Table 1": "Table 1: Classification accuracy (mean \\pm std) on small vision benchmarks.",
             "Table 3": "Table 3: Classification accuracy (%) (mean \\pm std) on language benchmarks."}
_CLEAN_QUOTES = {
    ("cifar10", "vit"): "DGViT consistently outperforms the baseline ViT, with the largest improvement on CIFAR-10 "
                        "(+2.2%), highlighting the value of gated inhibition in low-resolution, noise-sensitive "
                        "settings.",
    ("cifar10", "dvit"): "When compared directly to DViT, DGViT yields competitive or superior performance in all "
                         "settings.",
    ("20newsgroups", "transformer"): "The advantages are most evident on 20 Newsgroups, where DGT consistently "
                                     "surpasses both baselines",
    ("20newsgroups", "dt"): "The advantages are most evident on 20 Newsgroups, where DGT consistently surpasses both "
                            "baselines",
    ("text", ""): "DGT improves over both baselines across all datasets.",
}
_STRONG_NAMED = ("gaussian_noise", "shot_noise", "defocus_blur", "motion_blur", "zoom_blur", "snow", "frost",
                 "jpeg_compression")
_SEV = (1, 2, 3, 4, 5)


def _builtin() -> None:
    r = register
    for ds, dg, bases, table in (("cifar10", "dgvit", ("vit", "dvit"), "Table 1"),
                                 ("20newsgroups", "dgt", ("transformer", "dt"), "Table 3"),
                                 ("rotten-tomatoes", "dgt", ("transformer", "dt"), "Table 3")):
        fam = f"{ds} · primary"
        for b in bases:
            quote = _CLEAN_QUOTES.get((ds, b), _CLEAN_QUOTES[("text", "")])
            r(Claim(f"{ds}:clean:{b}", quote, table, ds, dg, b, "mean", family=fam, label="clean accuracy",
                    operationalisation="clean test accuracy higher: mean over matched seeds of the paired "
                                       "difference > 0" + ("; 'competitive or superior' is read as superior, the "
                                                           "difference Table 1 prints" if b == "dvit" else "")))
    for b in ("vit", "dvit"):
        fam = "cifar10 · Figure 4a sentences"
        r(Claim(f"cifar10:mCA:{b}", _FIG4, "Figure 4a", "cifar10", "dgvit", b, "mean", (BENCHMARK,), _SEV,
                family="cifar10 · primary", label="mCA (robustness improvement)",
                operationalisation="'robustness improvements' = mCA (15 corruptions × severities 1–5) higher"))
        r(Claim(f"cifar10:nearly-all:{b}", _NEARLY, "Figure 4a", "cifar10", "dgvit", b, "kth_smallest_gain",
                (BENCHMARK,), _SEV, k=3, family=fam, primary=False, label="higher on nearly all corruptions",
                operationalisation="'nearly all types' = the gain (mean over severities 1–5) is positive on at "
                                   "least 13 of the 15 corruptions ⇔ the 3rd smallest gain > 0"))
        r(Claim(f"cifar10:strong:{b}", _STRONG, "Figure 4a", "cifar10", "dgvit", b, "named_minus_median",
                (BENCHMARK,), _SEV, named=_STRONG_NAMED, family=fam, primary=False,
                label="strong gains on the 8 named",
                operationalisation="'particularly strong gains on X' = mean gain on the 8 named corruptions "
                                   "exceeds the median gain on the other 7"))
        r(Claim(f"cifar10:largest:{b}", _LARGEST, "Figure 4a", "cifar10", "dgvit", b, "named_min_minus_max",
                (BENCHMARK,), _SEV, named=("fog", "contrast"), family=fam, primary=False,
                label="largest gains on fog, contrast",
                operationalisation="'the largest improvements occur under fog and contrast' = the smaller of the "
                                   "fog and contrast gains exceeds every other corruption's gain"))
        r(Claim(f"cifar10:only-impulse:{b}", _ONLY, "Figure 4a", "cifar10", "dgvit", b, "kth_smallest_gain",
                tuple(c for c in _BENCH if c != "impulse_noise"), _SEV, k=1, threshold=0.5, family=fam,
                primary=False, label="baseline competitive only on impulse",
                operationalisation="'competitive' = the baseline comes within 0.5 points (gain ≤ 0.5); 'only "
                                   "impulse noise' = the smallest gain over the other 14 corruptions > 0.5 points"))
    r(Claim("cifar10:impulse-low:vit", _IMP_LOW, "Figure 4a", "cifar10", "dgvit", "vit", "mean",
            ("impulse_noise",), (1, 2), direction="less", family="cifar10 · Figure 4a sentences", primary=False,
            label="ViT better on impulse, severities 1–2",
            operationalisation="'low severities' = 1–2; 'Vanilla better' = DGViT − ViT < 0 on their mean"))
    r(Claim("cifar10:impulse-high:vit", _IMP_HIGH, "Figure 4a", "cifar10", "dgvit", "vit", "mean",
            ("impulse_noise",), (4, 5), direction="equivalent", margin=1.0, family="cifar10 · Figure 4a sentences",
            primary=False, label="no difference on impulse, severities 4–5",
            operationalisation="'disappears at higher severities' = at severities 4–5 the difference is within "
                               "±1 point (equivalence, TOST); 'no significant difference' (two-sided t) is the "
                               "sensitivity analysis"))
    for ds in ("20newsgroups", "rotten-tomatoes"):
        for b in ("transformer", "dt"):
            r(Claim(f"{ds}:mNA:{b}", _TEXT, "Abstract", ds, "dgt", b, "mean", (NOISE,), _SEV,
                    family=f"{ds} · primary", label="mNA (robustness gain)",
                    operationalisation="'robustness gains' on text = mNA (every noise type × severities 1–5) "
                                       "higher; the paper publishes no text-noise numbers"))
    for ds, dg, bases, robust in (("cifar10", "dgvit", ("vit", "dvit"), (BENCHMARK,)),
                                  ("20newsgroups", "dgt", ("transformer", "dt"), (NOISE,)),
                                  ("rotten-tomatoes", "dgt", ("transformer", "dt"), (NOISE,))):
        for b in bases:
            r(Claim(f"{ds}:retention:{b}", "", NOT_CLAIMED, ds, dg, b, "retention", robust, _SEV,
                    family=f"{ds} · suite measures", primary=False, label="retention (not claimed)",
                    operationalisation="the suite's own measure; retention favours a model with lower clean "
                                       "accuracy, and the paper claims no relative-drop advantage"))
            r(Claim(f"{ds}:relative-mCE:{b}", "", NOT_CLAIMED, ds, dg, b, "relative_mce", robust, _SEV,
                    direction="less", family=f"{ds} · suite measures", primary=False,
                    label="relative mCE (not claimed)",
                    operationalisation="the suite's own measure: the model's errors per corruption relative to "
                                       "the baseline's, averaged, minus 100 %; < 0 = fewer errors"))


# --- the second campaign (results/evidence-v2): registered on 2026-11-28, before any of its runs -------------
_GATE = ("highlighting the value of gated inhibition in low-resolution, noise-sensitive settings.")
_GATE_DESIGN = ("we replace its subtraction scalar with a lightweight gating network that learns input-dependent "
                "and head-specific inhibitory weights.")
_QRES = ("It also integrates an optional residual connection inside the M-DGSA block to facilitate gradient flow, "
         "stabilize training, and boost model’s performance.")
_LEARN = ("After experimenting with various λ_{init} settings, we found that holding it fixed at 0.8 outperforms "
          "both other constant values and treating it as a learnable parameter.")
_FMNIST_VIT = ("On the other datasets, improvements are more modest (typically within 0.2-0.6%), yet they remain "
               "steady across configurations and never come at the cost of degraded accuracy.")
_FMNIST_DVIT = ("On FashionMNIST, DGViT slightly surpasses DViT, demonstrating that input-dependent gating remains "
                "beneficial even in simpler domains.")
_IMDB = ("On the simpler sentiment tasks (Rotten Tomatoes, IMDB) and the four-class AG News, gains are modest "
         "(typically +1-2%)")


def _isolating_claims() -> None:
    """CIFAR-10: what makes DGViT differ. Each comparison changes one thing (the models' docstrings say what)."""
    fam = "cifar10 · isolating the gate"
    for other, what, quote, source in (
            ("dgvit_nogate", "its gate-less twin", _GATE_DESIGN, "Section 4"),
            ("vit_swiglu", "an FFN-matched ViT", _GATE, "Table 1")):
        short = "gate" if other == "dgvit_nogate" else "ffn-matched"
        r = register
        r(Claim(f"cifar10:{short}:clean", quote, source, "cifar10", "dgvit", other, "mean", family=fam,
                label=f"clean accuracy vs {what}",
                operationalisation=f"DGViT minus {what} ({other}), clean test accuracy higher: mean over matched "
                                   "seeds of the paired difference > 0"))
        r(Claim(f"cifar10:{short}:mCA", quote, source, "cifar10", "dgvit", other, "mean", (BENCHMARK,), _SEV,
                family=fam, label=f"mCA vs {what}",
                operationalisation=f"DGViT minus {what} ({other}): mCA (15 corruptions × severities 1–5) higher"))
    fam = "cifar10 · DGViT's design choices"
    register(Claim("cifar10:q-residual:clean", _QRES, "Section 4.3", "cifar10", "dgvit", "dgvit_noqres", "mean",
                   family=fam, label="Q-residual helps (clean)",
                   operationalisation="'boost model's performance' = DGViT's clean accuracy higher than the same "
                                      "model without the Q-residual"))
    register(Claim("cifar10:fixed-lambda:clean", _LEARN, "Appendix B.5", "cifar10", "dgvit", "dgvit_learnlambda",
                   "mean", family=fam, label="fixed λ_init 0.8 beats learnable (clean)",
                   operationalisation="'outperforms' = DGViT (λ_init fixed 0.8) clean accuracy higher than with a "
                                      "learnable λ_init per layer starting at 0.8"))


def _more_tables() -> None:
    """Table 1's FashionMNIST and Table 3's IMDB, clean and under corruption / text noise."""
    for ds, dg, bases, robust, quotes, table in (
            ("fashion-mnist", "dgvit", ("vit", "dvit"), BENCHMARK, (_FMNIST_VIT, _FMNIST_DVIT), "Table 1"),
            ("imdb", "dgt", ("transformer", "dt"), NOISE, (_IMDB, _CLEAN_QUOTES[("text", "")]), "Table 3")):
        fam = f"{ds} · primary"
        for b, quote in zip(bases, quotes):
            register(Claim(f"{ds}:clean:{b}", quote, table, ds, dg, b, "mean", family=fam, label="clean accuracy",
                           operationalisation="clean test accuracy higher: mean over matched seeds of the paired "
                                              "difference > 0"))
            register(Claim(f"{ds}:{'mCA' if robust == BENCHMARK else 'mNA'}:{b}", _TEXT, "Abstract", ds, dg, b,
                           "mean", (robust,), _SEV, family=fam,
                           label="mCA (robustness gain)" if robust == BENCHMARK else "mNA (robustness gain)",
                           operationalisation="'robustness gains' = mean accuracy over every corruption / noise "
                                              "type × severities 1–5 higher"))


def _adversarial_claims() -> None:
    """Not claimed by the paper (it measures common corruptions only): a prediction of its premise, that gating
    suppresses attention noise, so small adversarial perturbations should hurt DGViT less."""
    for b in ("vit", "dvit"):
        register(Claim(f"cifar10:linf-1/255:{b}", "", NOT_CLAIMED, "cifar10", "dgvit", b, "mean", ("linf",), (0,),
                       family="cifar10 · adversarial", primary=False, label="robust accuracy, Linf 1/255",
                       eps=1 / 255, attack="apgd-ce+apgd-t",
                       operationalisation="'more robust to small Linf perturbations' = robust accuracy at Linf eps "
                                          "1/255 under APGD-CE + APGD-T (AutoAttack's first two attacks, not full "
                                          "AutoAttack) higher, paired over training seeds"))


_BENCH = BENCHMARK_CORRUPTIONS
_builtin()
_isolating_claims()
_more_tables()
_adversarial_claims()
