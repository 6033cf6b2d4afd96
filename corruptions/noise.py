"""Noise corruptions: gaussian_noise, shot_noise, impulse_noise, speckle_noise.

Each draws one keyed uniform per element and turns it into the reference's distribution of the
truncated (``np.uint8``) output by exact inversion.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from . import _cpu_color
from .rng import KeyedRandom


# ----------------------------------------------------------------------------------------------
# Sampling by output level. Every noise here maps one input byte v (and the element's own draw) to an
# output byte, independently per element, so the output is a categorical variable over 0..255 whose
# probabilities P(out = j | v) follow from the reference formula. We tabulate those probabilities
# (float64, from the exact normal/Poisson distributions) and draw with Walker's alias method from one
# 53-bit uniform per element: the reference's distribution (to float64 precision of the table), at the
# cost of two table look-ups instead of a transcendental per element.

_LEVELS = 256


class _LevelSampler:
    """Alias tables (Vose's construction, vectorised over the 256 input values)."""

    def __init__(self, pmf: np.ndarray):
        rows, L = pmf.shape
        p = pmf / pmf.sum(axis=1, keepdims=True) * L
        prob = np.ones((rows, L))
        alias = np.tile(np.arange(L), (rows, 1))
        open_ = np.ones((rows, L), dtype=bool)
        r = np.arange(rows)
        for _ in range(L):
            small = open_ & (p < 1.0)
            large = open_ & (p >= 1.0)
            act = small.any(axis=1) & large.any(axis=1)
            if not act.any():
                break
            rr = r[act]
            s_ = np.argmax(small[act], axis=1)
            l_ = np.argmax(large[act], axis=1)
            prob[rr, s_] = p[rr, s_]
            alias[rr, s_] = l_
            p[rr, l_] = (p[rr, l_] + p[rr, s_]) - 1.0
            open_[rr, s_] = False
        # what stays open has p = 1 up to rounding: keep prob 1, alias itself
        self.prob = torch.as_tensor(prob.ravel())
        self.alias = torch.as_tensor(alias.ravel())
        # the CPU kernel's tables: the integer form of the prob test, and (k, alias) pairs
        self.thresholds = _cpu_color.alias_thresholds(prob.ravel())
        self.pick = _cpu_color.alias_pick_table(alias.ravel())
        self._dev: dict = {}

    def tables(self, device):
        key = str(device)
        if key not in self._dev:
            self._dev[key] = (self.prob.to(device), self.alias.to(device))
        return self._dev[key]

    def sample(self, x: torch.Tensor, rng: KeyedRandom) -> torch.Tensor:
        """One output level per element of the uint8 batch x (one keyed uniform each); on the CPU a
        compiled pass that makes each draw inline (same values, same decisions), elsewhere :meth:`sample_torch`."""
        if x.device.type != "cpu":
            return self.sample_torch(x, rng)
        return _cpu_color.alias_sample_cpu(x, rng, 0, self.thresholds, self.pick)

    def sample_torch(self, x: torch.Tensor, rng: KeyedRandom) -> torch.Tensor:
        """:meth:`sample` as whole-tensor torch operations (the CUDA path)."""
        prob, alias = self.tables(x.device)
        u = rng.uniform(int(np.prod(x.shape[1:]))).view(x.shape)
        q = u.mul_(float(_LEVELS))  # exact; column k = top 8 bits, q - k = the remaining 45 bits
        k = torch.floor(q).clamp_(max=_LEVELS - 1)  # u rounds to 1.0 for the largest draw (one in 2**53)
        f = q.sub_(k)
        k = k.to(torch.int64)
        idx = x.to(torch.int64).mul_(_LEVELS).add_(k)
        return torch.where(f < prob.take(idx), k, alias.take(idx)).to(torch.uint8)


def _interval_probs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """P(a <= Z < b) for a standard normal, accurate in both tails."""
    from scipy.special import ndtr

    return np.where(a >= 0, ndtr(-a) - ndtr(-b), ndtr(b) - ndtr(a))


def _normal_level_pmf(lo_z) -> np.ndarray:
    """pmf[v, j] from the z-thresholds of the level boundaries 1/255 .. 255/255 (None = level 0 surely)."""
    pmf = np.zeros((256, _LEVELS))
    for v in range(256):
        t = lo_z(v)
        if t is None:
            pmf[v, 0] = 1.0
            continue
        edges = np.concatenate([[-np.inf], t, [np.inf]])
        pmf[v] = _interval_probs(edges[:-1], edges[1:])
    return pmf


_THRESH = np.arange(1, 256) / 255.0  # y >= j/255 <=> output level >= j (level 255: y >= 1, clipped)


@lru_cache(maxsize=None)
def _gaussian_tables(c: float) -> _LevelSampler:
    x = np.arange(256) / 255.0
    return _LevelSampler(_normal_level_pmf(lambda v: (_THRESH - x[v]) / c))


@lru_cache(maxsize=None)
def _speckle_tables(c: float) -> _LevelSampler:
    x = np.arange(256) / 255.0
    # y = x + x*c*z >= t  <=>  z >= (t/x - 1)/c for x > 0; x = 0 stays 0
    return _LevelSampler(_normal_level_pmf(lambda v: None if v == 0 else (_THRESH / x[v] - 1.0) / c))


@lru_cache(maxsize=None)
def _shot_tables(c: int) -> _LevelSampler:
    """out = floor(clip(K / c, 0, 1) * 255), K ~ Poisson(v/255. * c) (float64 rate, as the reference)."""
    from scipy.special import gammaln, pdtrc

    lam = (np.arange(256) / 255.0) * c
    k = np.arange(int(c))  # K >= c always gives level 255
    level = np.floor(np.clip(k / c, 0, 1) * 255).astype(np.int64)
    pmf = np.zeros((256, _LEVELS))
    pmf[0, 0] = 1.0  # rate 0: K = 0
    lv = lam[1:, None]
    pk = np.exp(k[None, :] * np.log(lv) - lv - gammaln(k + 1.0)[None, :])  # Poisson pmf, (255, c)
    for j in np.unique(level):
        pmf[1:, j] = pk[:, level == j].sum(axis=1)
    pmf[1:, 255] += pdtrc(int(c) - 1, lam[1:])  # P(K >= c)
    return _LevelSampler(pmf)


def gaussian_noise(x: torch.Tensor, c: float, rng: KeyedRandom) -> torch.Tensor:
    """np.clip(x/255. + np.random.normal(size=x.shape, scale=c), 0, 1) * 255, truncated: per element the
    output level is drawn from its exact distribution (see the note above)."""
    return _gaussian_tables(float(c)).sample(x, rng)


def speckle_noise(x: torch.Tensor, c: float, rng: KeyedRandom) -> torch.Tensor:
    """np.clip(x + x * np.random.normal(size=x.shape, scale=c), 0, 1) * 255 (x in [0, 1]), truncated."""
    return _speckle_tables(float(c)).sample(x, rng)


def shot_noise(x: torch.Tensor, c: int, rng: KeyedRandom) -> torch.Tensor:
    """np.clip(np.random.poisson(x/255. * c) / c, 0, 1) * 255, truncated: levels lie exactly in
    {floor(255 k / c)}, with Poisson probabilities from SciPy."""
    return _shot_tables(int(c)).sample(x, rng)


def impulse_noise(x: torch.Tensor, c: float, rng: KeyedRandom) -> torch.Tensor:
    """skimage ``random_noise(mode='s&p', amount=c)``: each element is hit with probability c and becomes
    1 (salt) or 0 (pepper) with probability 1/2 each. One uniform u decides both: u < c/2 salt,
    c/2 <= u < c pepper (the same joint distribution as two independent Bernoulli draws). Unhit
    elements come back exactly (floor((v/255)*255) = v for every byte).

    On the CPU a compiled pass (the same draws and comparisons, made inline); elsewhere :func:`impulse_noise_torch`."""
    if x.device.type == "cpu":
        return _cpu_color.impulse_cpu(x, rng, 0, c)
    return impulse_noise_torch(x, c, rng)


def impulse_noise_torch(x: torch.Tensor, c: float, rng: KeyedRandom) -> torch.Tensor:
    """:func:`impulse_noise` as whole-tensor torch operations (the CUDA path)."""
    u = rng.uniform(int(np.prod(x.shape[1:]))).view(x.shape)
    salt = torch.full_like(x, 255)
    return torch.where(u < c / 2, salt, torch.where(u < c, torch.zeros_like(x), x))
