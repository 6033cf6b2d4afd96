"""Learning-rate schedules as multipliers of the base lr, one value per optimizer step.

Both are plain functions of the step index, for ``torch.optim.lr_scheduler.LambdaLR`` (which calls them
with 0 before the first step, 1 before the second, ...). With ``W`` warm-up steps and ``T`` total steps:

* warm-up (both schedules), ``s < W``:   ``m(s) = (s + 1) / W``  (reaches 1 at the last warm-up step;
  the first step is not wasted at lr 0)
* cosine annealing, ``s >= W``:          ``m(s) = 0.5 * (1 + cos(pi * (s - W) / (T - W)))``  (1 -> 0)
* linear decay, ``s >= W``:              ``m(s) = (T - s) / (T - W)``                  (1 -> 0)

The decay reaches 0 at ``s = T`` (one past the last step), so every step trains. Values are clamped to
``[0, 1]``. If ``W >= T`` the run never leaves warm-up.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from robustbench_dgsa.util.errors import UserError

SCHEDULES = ("cosine", "linear", "constant")


@dataclass(frozen=True)
class _Schedule:
    """A picklable multiplier function (LambdaLR can then save it in its state_dict)."""
    kind: str
    total_steps: int
    warmup_steps: int = 0

    def __call__(self, step: int) -> float:
        total, warm = max(1, int(self.total_steps)), max(0, int(self.warmup_steps))
        if step < warm:
            return min(1.0, (step + 1) / warm)
        if self.kind == "constant":
            return 1.0
        span = max(1, total - warm)
        progress = min(1.0, max(0.0, (step - warm) / span))
        if self.kind == "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * progress))
        if self.kind == "linear":
            return 1.0 - progress
        raise ValueError(f"unknown schedule {self.kind!r} (valid: {', '.join(SCHEDULES)})")


def cosine(total_steps: int, warmup_steps: int = 0) -> _Schedule:
    """Cosine annealing to 0 per step, optionally after a linear warm-up."""
    return _Schedule("cosine", total_steps, warmup_steps)


def linear(total_steps: int, warmup_steps: int = 0) -> _Schedule:
    """Linear warm-up then linear decay to 0 (the text presets, paper Table 6)."""
    return _Schedule("linear", total_steps, warmup_steps)


def constant(total_steps: int = 0, warmup_steps: int = 0) -> _Schedule:
    return _Schedule("constant", total_steps, warmup_steps)


def make_schedule(kind: str, total_steps: int, warmup_steps: int = 0) -> _Schedule:
    if kind not in SCHEDULES:
        raise UserError(f"unknown schedule {kind!r} (valid: {', '.join(SCHEDULES)})")
    return _Schedule(kind, total_steps, warmup_steps)

