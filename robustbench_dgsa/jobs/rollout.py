"""Attention rollout for one input or as metrics: what ``dgsa-bench rollout`` runs.

:func:`run_rollout` loads the models asked for (checkpoints, shipped models, untrained registry models, a timm
model; the shipped models of the input's modality when none is named), then either explains an image (a file
or a dataset's test image) or a text (:mod:`robustbench_dgsa.rollout.explain`: figure + heat maps + summary),
or computes the rollout numbers (salient mass, drift) on the synthetic sets into a results store
(:func:`robustbench_dgsa.rollout.runs.rollout_metrics_run`).

Messages that point at a parameter name it as ``spell`` spells it (a command line passes its flags).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

Say = Callable[[str], None]

#: how messages name the parameters they point at
SPELL: Mapping[str, str] = {"choose_models": "checkpoints= / pretrained="}


def _quiet(message: str) -> None:
    """A ``log`` / ``warn`` that says nothing."""


def rollout_sources(checkpoints: Sequence[Path] = (), pretrained: Sequence[str] = (), untrained: Sequence[str] = (),
                    timm: dict[str, Any] | None = None, modality: str = "image", text: str | None = None,
                    log: Say = _quiet, warn: Say = _quiet, spell: Mapping[str, str] = SPELL) -> list:
    """The models named (``timm``: the keyword arguments of :func:`robustbench_dgsa.rollout.sources.timm_source`),
    or the shipped models of ``modality`` when none is named (said through ``log``); each model's notes
    through ``warn``."""
    from robustbench_dgsa.rollout.sources import load_sources, timm_source, zoo_sources
    sources = load_sources(checkpoints=checkpoints, pretrained=pretrained, untrained=untrained, text=text)
    if timm is not None:
        sources.append(timm_source(**timm))
    if not sources:
        sources = zoo_sources(modality)
        names = ", ".join(s.source.removeprefix("pretrained:") for s in sources)
        data = "IMDB reviews" if modality == "text" else "CIFAR-10 (32 x 32 inputs; the image is resized to 32 x 32)"
        log(f"using the shipped models {names}, trained on {data} (seed {sources[0].seed}); "
            f"{spell['choose_models']} choose others")
    for s in sources:
        for note in s.notes:
            warn(f"warning: {note}")
    return sources


def rollout_metrics(sources: Sequence[Any], store: Path, dataset: str | None, *,
                    corruptions: Sequence[str] | None, severities: Sequence[int], max_examples: int, options: Any,
                    progress: bool) -> list[dict[str, Any]]:
    """Salient mass and drift of every source on the synthetic test set, into ``store``: one summary each."""
    from robustbench_dgsa.rollout.runs import rollout_metrics_run

    return [rollout_metrics_run(s.model, store, dataset, corruptions=corruptions, severities=severities,
                                modes=[options.mode] if options.mode else None, head_fusion=options.head_fusion,
                                discard_ratio=options.discard_ratio, max_examples=max_examples,
                                preprocess=s.preprocess, meta={**s.meta, "checkpoint": s.source},
                                device=options.device, progress=progress)
            for s in sources]


def run_rollout(options: Any, *, image: Path | None = None, text: str | None = None, dataset: str | None = None,
                index: int | None = None, data_root: Path | None = None, out: Path | None = None,
                checkpoints: Sequence[Path] = (), pretrained: Sequence[str] = (), untrained: Sequence[str] = (),
                timm: dict[str, Any] | None = None, metrics: bool = False, store: Path = Path("runs/store"),
                corruptions: Sequence[str] | None = None, severities: Sequence[int] = (1, 2, 3, 4, 5),
                max_examples: int = 200, progress: bool = True, log: Say = _quiet, warn: Say = _quiet,
                spell: Mapping[str, str] = SPELL) -> dict[str, Any]:
    """Roll out ``image`` (or test image ``index`` of ``dataset``, written as a PNG beside ``out``), ``text``, or
    with ``metrics`` the synthetic sets into ``store``, for the models named (see :func:`rollout_sources`).

    ``options``: a checked :class:`robustbench_dgsa.rollout.explain.RolloutOptions`. Returns {"metrics": one
    summary per model} or {"doc": the explanation's summary, "files": the files written}."""
    from robustbench_dgsa.rollout.explain import dataset_image, explain_image, explain_text

    if image is not None:
        from robustbench_dgsa.data.readers import check_image_file
        check_image_file(image)  # fail on a bad image (header only) before loading any model
    sources = rollout_sources(checkpoints, pretrained, untrained, timm, "text" if text is not None else "image",
                              text, log, warn, spell)
    if metrics:
        return {"metrics": rollout_metrics(sources, store, dataset, corruptions=corruptions, severities=severities,
                                           max_examples=max_examples, options=options, progress=progress)}
    if text is not None:
        result = explain_text(text, sources, out or Path("text_rollout.png"), options)
    else:
        if index is not None:
            image = dataset_image(dataset, index, out.parent if out else Path("."), data_root)
        result = explain_image(image, sources, out or Path(f"{image.stem}_rollout.png"), options)
    return {"doc": result.doc, "files": result.files}
