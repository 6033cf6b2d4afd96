"""The report's "Warnings and caveats": what a reader must know before trusting any number (substitute frost
textures, the JPEG copy of CIFAR-10, subsets, outside models, seeds below the paper's, cell-level tests sharing
models), each line naming its evidence."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from robustbench_dgsa.analysis import metrics
from robustbench_dgsa.report.frost import frost_substitutes
from robustbench_dgsa.report.labels import dataset_label, display_name

if TYPE_CHECKING:
    from robustbench_dgsa.report.document import Report

PAPER_SEEDS = 5


def caveat_lines(rep: Report, cfgs: dict[str, dict[str, Any]], datasets: dict[str, str]) -> list[str]:
    """What a reader must know before trusting any number below (each line names the evidence)."""
    out: list[str] = []
    for ds, src in sorted(frost_substitutes(rep.df, rep.runs, rep.store_dir).items()):
        out.append(f"Substitute: frost on {dataset_label(ds)} uses the {src} textures, not the reference frost "
                   "images (the corruption manifest / evaluation record says so); its cells, mCA and the weather "
                   "group are not comparable with CIFAR-10-C.")
    ev = rep.df[(rep.df["kind"] == "eval") & (rep.df["condition"] == metrics.CLEAN)]
    for ds, g in ev.groupby("dataset", sort=True):
        srcs = sorted(set(g["source"]) - {""})
        if any("JPEG" in x for x in srcs):
            out.append(f"Substitute: {dataset_label(ds)} comes from the lossy JPEG copy (quality 75, mean absolute "
                       "error about 5.8/255 against the original pixels), not the official files.")
        if any("subset" in x or re.search(r"images 0\.\.\d+", x) for x in srcs):
            out.append(f"Subset: {dataset_label(ds)} is evaluated on part of the official test split "
                       f"({'; '.join(srcs)[:200]}).")
    for ds in datasets:
        line = _subset_line(rep, cfgs, ds)
        if line:
            out.append(line)
    out += _no_reference_size_lines(rep, cfgs, datasets)
    out += scale_lines(rep, cfgs, datasets)
    out += _outside_model_lines(rep)
    seeds = rep.df[rep.df["kind"].isin(["eval", "train"]) & (rep.df["seed"] >= 0)]
    few = []
    for (ds, m), g in seeds.groupby(["dataset", "model"], sort=True):
        n = g["seed"].nunique()
        if n < PAPER_SEEDS:
            few.append((ds, m, n))
    if few:
        by_n: dict[int, list[str]] = {}
        for ds, m, n in few:
            by_n.setdefault(n, []).append(f"{display_name(m)} on {dataset_label(ds)}")
        every = len(few) == seeds.groupby(["dataset", "model"]).ngroups and len(by_n) == 1
        desc = (f"{few[0][2]} seed{'s' if few[0][2] != 1 else ''} for every model" if every else
                "; ".join(f"{n} seed{'s' if n != 1 else ''}: {', '.join(v)}" for n, v in sorted(by_n.items())))
        testable = min(n for _, _, n in few) >= 3
        out.append(f"Seeds below the paper's {PAPER_SEEDS}: {desc}. SDs and intervals are wide"
                   + ("." if testable else "; with fewer than 3 seeds per model no comparison is testable and none "
                      "is called significant (the tables show the numbers with 'not testable: n seeds')."))
    if rep.cell_tests:
        out.append("Cells share models: the tests over corruption / noise cells (Wilcoxon, Friedman, the rank "
                   "diagram) compare conditions of the same few trained models, so they show consistency across "
                   "conditions, not independent evidence. The claims' tests are the seed-level ones in Findings.")
    return out


def train_sizes(runs: dict[str, dict[str, Any]], dataset: str) -> list[tuple[int, int, int]]:
    """(training examples used, official training split, held out for validation) of the training runs on
    ``dataset``, as their run records counted them (``data.n_train`` / ``n_train_official`` / ``n_val``)."""
    out = set()
    for rec in runs.values():
        d = rec.get("data") if rec.get("kind") == "train" else None
        if isinstance(d, dict) and rec.get("dataset") == dataset and d.get("n_train"):
            out.add((int(d["n_train"]), int(d.get("n_train_official") or 0), int(d.get("n_val") or 0)))
    return sorted(out)


def train_words(sizes: list[tuple[int, int, int]]) -> str:
    """"6,824 of the 8,530 official training examples (80 %; 1,706 held out for validation)"."""
    parts = []
    for n, off, val in sizes:
        w = f"{n:,}"
        if off:
            w += f" of the {off:,} official training examples ({100 * n / off:.0f} %"
            w += f"; {val:,} held out for validation)" if val else ")"
        else:
            w += " training examples"
        parts.append(w)
    return " / ".join(parts)


def _subset_line(rep: Report, cfgs: dict[str, dict[str, Any]], ds: str) -> str:
    """The training and test examples the runs on ``ds`` used, counted from the run records and rows (the config
    caps say only "at most")."""
    hashes = sorted(set(rep.df.loc[(rep.df["dataset"] == ds), "config_hash"]) - {""})
    data = [cfgs[h]["data"] for h in hashes if h in cfgs and "data" in cfgs[h]]
    sizes = train_sizes(rep.runs, ds)
    partial = [t for t in sizes if not t[1] or t[0] + t[2] < t[1]]     # a cap left training examples unused
    if not sizes:
        partial = [(int(v), 0, 0) for v in sorted({d.get("max_train") for d in data if d.get("max_train")})]
    ms = sorted({(d.get("max_test"), d.get("test_subset") or "first") for d in data if d.get("max_test")})
    if ms and whole_test_split(rep.df, ds, min(n for n, _ in ms)):
        ms = []                                  # the cap is above the split's size: every test example counts
    if not (partial or ms):
        return ""
    parts = ([f"trained on {train_words(partial)}"] if partial else []) + \
        ([f"evaluated on {', '.join(subset_words(n, how) for n, how in ms)} test examples"] if ms else [])
    return (f"Subset: on {dataset_label(ds)} the runs were {' and '.join(parts)} — not the paper's full splits; "
            "accuracies are not comparable with the paper's.")


#: image sides with a reference corruption generator (CIFAR-10-C, Tiny-ImageNet-C, ImageNet-C)
REFERENCE_SIDES = (32, 64, 224)


def _no_reference_size_lines(rep: Report, cfgs: dict[str, dict[str, Any]], datasets: dict[str, str]) -> list[str]:
    """Image datasets evaluated under corruptions at a side no reference generator was made for (FashionMNIST's
    28 px): their corruptions used another size's constants."""
    out = []
    for ds, modality in datasets.items():
        rows = rep.df[(rep.df["dataset"] == ds) & (rep.df["kind"] == "eval") & (rep.df["severity"] >= 1)]
        if modality != "image" or rows.empty:
            continue
        hashes = sorted(set(rep.df.loc[rep.df["dataset"] == ds, "config_hash"]) - {""})
        sides = sorted({int(cfgs[h]["model"]["image_size"]) for h in hashes
                        if "image_size" in cfgs.get(h, {}).get("model", {})} - set(REFERENCE_SIDES))
        if sides:
            out.append(f"Constants of another size: {dataset_label(ds)}'s {sides[0]}×{sides[0]} images have no "
                       "reference corruption generator, so they were corrupted with constants made for another "
                       "size (the corruption folder's manifest names which). Its corrupted accuracies compare the "
                       "models with each other; they are not a published benchmark's numbers.")
    return out


def scale_lines(rep: Report, cfgs: dict[str, dict[str, Any]], datasets: dict[str, str]) -> list[str]:
    """Model scale against the paper's, per dataset: width (D), depth, width × depth (the registry's default
    config is the paper's architecture) and parameters (ours from the training run records, the paper's from
    published.csv, Tables 7–9)."""
    from robustbench_dgsa.models.registry import get_model_config
    from robustbench_dgsa.report.published import load_published

    pub = load_published()
    pub = pub[pub["metric"] == "params"]
    out = []
    for ds in datasets:
        tr = rep.df[(rep.df["dataset"] == ds) & (rep.df["kind"] == "train")]
        cfg = next((cfgs[h] for h in sorted(set(tr["config_hash"]) - {""}) if h in cfgs), None)
        if cfg is None or cfg["model"].get("name") is None:
            continue
        m = cfg["model"]
        try:
            ref = get_model_config(str(m["name"]))
        except Exception:  # noqa: BLE001 - an outside model has no paper architecture
            continue
        wd = (m["dim"] * m["depth"]) / (ref.dim * ref.depth)
        words = [f"D = {m['dim']} vs {ref.dim}, {m['depth']} vs {ref.depth} blocks: width × depth = 1/{1 / wd:.1f}"]
        ratios = []
        for model in sorted(set(tr["model"])):
            ours = {int(r.get("params") or 0) for r in rep.runs.values()
                    if r.get("kind") == "train" and r.get("dataset") == ds and r.get("model") == model} - {0}
            p = pub[(pub["dataset"] == ds) & (pub["model"] == model)]
            if ours and len(p):
                theirs = float(p["mean"].iloc[0]) * (1e6 if str(p["unit"].iloc[0]) == "M" else 1.0)
                ratios.append(theirs / max(ours))
        if ratios:
            words.append(f"parameters 1/{min(ratios):.1f} to 1/{max(ratios):.1f} of the paper's "
                         f"(published.csv, {len(ratios)} model(s))")
        out.append(f"Scale: on {dataset_label(ds)} the models are smaller than the paper's — {'; '.join(words)}.")
    return out


def clean_test_counts(df: Any, dataset: str) -> set[int]:
    """The numbers of test examples the clean evaluations on ``dataset`` counted (their rows' ``n``)."""
    rows = df[(df["dataset"] == dataset) & (df["kind"] == "eval") & (df["condition"] == metrics.CLEAN)]
    return {int(n) for n in rows["n"] if n == n and int(n) > 0}


def test_examples_words(df: Any, dataset: str, max_test: int | None, how: str) -> str:
    """"2,000 (...) test examples", or "all 1,066 test examples" when the cap is above the split's size (the
    count comes from the clean evaluations' rows, not from the cap)."""
    if max_test and whole_test_split(df, dataset, max_test):
        counts = sorted(clean_test_counts(df, dataset))
        return f"all {' / '.join(f'{c:,}' for c in counts)} test examples"
    return f"{subset_words(max_test, how)} test examples" if max_test else ""


def whole_test_split(df: Any, dataset: str, max_test: int) -> bool:
    """Whether a test cap of ``max_test`` kept every test example: the clean evaluations counted fewer."""
    counts = clean_test_counts(df, dataset)
    return bool(counts) and max(counts) < max_test


def subset_words(n: int, how: str) -> str:
    return {"first": f"the first {n:,}", "stratified": f"a class-stratified {n:,} (seed 0)",
            "auto": f"{n:,} (the first, or class-stratified where those miss a class)"}.get(how, f"{n:,} ({how})")


def _outside_model_lines(rep: Report) -> list[str]:
    """Models evaluated with benchmark / --timm / --module: their input convention and test examples."""
    seen: dict[str, set[str]] = {}
    for rec in rep.runs.values():
        if rec.get("origin") == "benchmark" and rec.get("model"):
            words = str(rec.get("input") or "input convention not recorded")
            if rec.get("examples"):
                words += f"; test examples: {rec['examples']}"
            seen.setdefault(str(rec["model"]), set()).add(words)
    return [f"Outside model {m}: {' | '.join(sorted(w))}." for m, w in sorted(seen.items())]
