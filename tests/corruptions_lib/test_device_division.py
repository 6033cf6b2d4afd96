"""The corruptions' device (torch) paths divide as the CPU kernels do. PyTorch's CUDA kernels compute ``x / s`` for a
Python scalar ``s`` as ``x * (1 / s)``, which can lose a bit; on an H200 (device check, 2026-11-28) that left
saturate 6.1 % and brightness 0.12 % of bytes one off the CPU kernels. Here that arithmetic is emulated on the CPU
(every division by a Python scalar becomes a multiplication by its reciprocal) and the device branch of
:func:`corruptions._ops.divisor` is forced: the torch paths must still equal the CPU kernels bit for bit."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import corruptions as C
from corruptions import _ops, blur, digital, weather
from corruptions.rng import KeyedRandom

P = {name: spec.params for name, spec in C.CORRUPTIONS.items()}


@pytest.fixture
def cuda_like_division(monkeypatch):
    """Division by a Python scalar as multiplication by its reciprocal (PyTorch's CUDA kernels), and divisors
    given as the device path gives them."""
    real_div_, real_truediv, real_div = torch.Tensor.div_, torch.Tensor.__truediv__, torch.div

    def div_(self, other, *args, **kwargs):
        if isinstance(other, (int, float)) and not args and not kwargs:
            return self.mul_(1.0 / other)
        return real_div_(self, other, *args, **kwargs)

    def truediv(self, other):
        return self * (1.0 / other) if isinstance(other, (int, float)) else real_truediv(self, other)

    def div(a, b, *args, **kwargs):
        if isinstance(b, (int, float)) and isinstance(a, torch.Tensor) and not args and not kwargs:
            return a * (1.0 / b)
        return real_div(a, b, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "div_", div_)
    monkeypatch.setattr(torch.Tensor, "__truediv__", truediv)
    monkeypatch.setattr(torch, "div", div)
    monkeypatch.setattr(_ops, "divisor", lambda x, d: torch.full((), d, dtype=x.dtype, device=x.device))


def _images(n: int = 96, seed: int = 0) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).integers(0, 256, (n, 32, 32, 3)).astype(np.uint8))


def test_emulation_reproduces_the_device_difference(cuda_like_division, monkeypatch):
    """The emulation is the cause: with the scalar divisor restored, saturate's torch path leaves the CPU kernel's
    bytes (as it did on the H200)."""
    monkeypatch.setattr(_ops, "divisor", lambda x, d: d)
    x = _images()
    assert not torch.equal(digital.saturate_torch(x, P["saturate"][2]), digital.saturate(x, P["saturate"][2]))


@pytest.mark.parametrize("severity", [1, 3, 5])
def test_device_paths_divide_like_the_cpu_kernels(cuda_like_division, severity):
    x = _images()
    i = severity - 1
    assert torch.equal(digital.saturate_torch(x, P["saturate"][i]), digital.saturate(x, P["saturate"][i]))
    assert torch.equal(weather.brightness_torch(x, P["brightness"][i]), weather.brightness(x, P["brightness"][i]))
    assert torch.equal(digital.contrast_torch(x, P["contrast"][i]), digital.contrast(x, P["contrast"][i]))
    assert torch.equal(blur.zoom_blur_torch(x, P["zoom_blur"][i]), blur.zoom_blur(x, P["zoom_blur"][i]))
    assert torch.equal(blur.defocus_blur_torch(x, P["defocus_blur"][i]), blur.defocus_blur(x, P["defocus_blur"][i]))
    params = P["glass_blur"][i]
    choices = torch.randint(0, 4, (x.shape[0], params[2], 30, 30), generator=torch.Generator().manual_seed(severity))
    assert torch.equal(blur.glass_blur_apply_torch(x, params, choices), blur.glass_blur_apply(x, params, choices))
    jitter, ndx, ndy = digital.elastic_draws(KeyedRandom(5, "elastic_transform", severity, np.arange(len(x))),
                                             P["elastic_transform"][i], 32, 32)
    assert torch.equal(digital.elastic_apply(x, P["elastic_transform"][i], jitter, ndx, ndy),
                       digital.elastic_apply_cpu(x, P["elastic_transform"][i], jitter, ndx, ndy))
