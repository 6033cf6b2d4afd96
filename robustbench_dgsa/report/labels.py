"""Names and orders every section of the report shares: dataset and model labels without control characters,
corruption labels (frost made with the procedural substitute says so), the canonical order of corruptions and
noise types, and the words saying over how many seeds a value is."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from corruptions.text import TEXT_NOISE_TYPES

from robustbench_dgsa.analysis import metrics
from robustbench_dgsa.data.registry import dataset_label as _registry_dataset_label
from robustbench_dgsa.models.registry import display_name as _registry_name
from robustbench_dgsa.report.tables import printable

if TYPE_CHECKING:
    from robustbench_dgsa.report.document import Report

ACC_SCALE = 100.0   # store accuracies are fractions; the report prints percent


def dataset_label(name: str) -> str:
    """The dataset registry's label (cifar10 -> CIFAR-10), without control characters."""
    return printable(_registry_dataset_label(name), cell=True)


def display_name(name: str) -> str:
    """The registry's display name (vit -> ViT); a name from the data without control characters (a NUL would
    break a figure's font lookup and every format the report writes)."""
    return printable(_registry_name(name), cell=True)


def model_labels(models) -> dict[str, str]:
    """model -> its display name, for a figure's legend."""
    return {m: display_name(m) for m in models}


#: said wherever a frost number or image made with the procedural substitute appears
PROCEDURAL_FROST_NOTE = ("Frost here uses the procedural substitute textures, not the reference frost photographs: "
                         "its numbers (and mCA, mCE and the weather group, which include it) are not comparable with "
                         "CIFAR-10-C.")
FROST_GROUP = next(g for g, members in metrics.CORRUPTION_GROUPS.items() if "frost" in members)


def condition_label(rep: Report, ds: str, condition: str) -> str:
    """A corruption's name for a panel or a table row; frost made with the procedural substitute says so."""
    label = condition.replace("_", " ")
    return f"{label} (procedural)" if condition == "frost" and rep.procedural_frost(ds) else label


def condition_order(conditions, modality: str) -> list[str]:
    """``conditions`` less clean, in the canonical order of the modality's corruptions / noise types (others
    after them, sorted)."""
    if modality == "text":
        order: Sequence[str] = TEXT_NOISE_TYPES
    else:
        order = metrics.IMAGE_CORRUPTIONS
    conditions = set(conditions) - {metrics.CLEAN}
    return [c for c in order if c in conditions] + sorted(c for c in conditions if c not in order)


def seed_words(seeds: Sequence[int]) -> tuple[str, str]:
    """(a sentence for a table's notes, a suffix for its title) saying over which seeds its values are: mean ±
    SD over several seeds, or one seed named as such (never "over seeds" for a single one)."""
    if len(seeds) == 1:
        return (f"Single seed: every value is from seed {seeds[0]} (one trained model per column; no SD).",
                f" (single seed: seed {seeds[0]})")
    return f"Mean ± sample SD over {len(seeds)} seeds ({', '.join(map(str, seeds))}).", ""
