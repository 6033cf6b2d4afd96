"""Keyed, counter-based randomness: every draw for image i is a pure function of
(seed, corruption name, severity, image index i, stream, counter).

So any subset of a dataset regenerates bit-identically, in any order, in any chunking, on CPU or CUDA.

Construction (all arithmetic mod 2**64 on int64 tensors, identical on every device):

* ``base = blake2b-64("<regime key>|<seed>|<name>|<severity>")`` (Python, once per call; the key is
  ``cifar-c``, ``tiny-imagenet-c`` or ``imagenet-c``);
* ``key_i = mix(base + mix(index_i + GOLDEN))`` per image;
* the j-th 64-bit word of stream s is ``mix(key_i + (s * 2**32 + j + 1) * GOLDEN)``: a SplitMix64 stream
  per (image, stream), with ``mix`` the SplitMix64 finaliser (Stafford variant 13);
* a uniform is ``(top 53 bits + 0.5) / 2**53`` in float64, so it lies in (0, 1]: from 2**52 on the + 0.5 rounds
  half to even, and the largest word gives exactly 1.0 (one draw in 2**53).

On the CPU the same words are computed by a compiled uint64 loop (native logical shifts and wrapping
multiplies, one pass); elsewhere with int64 torch tensors. Torch has no unsigned 64-bit multiply and its ``>>`` is arithmetic on int64, so ``mix`` masks after each
shift; the multiplications rely on two's-complement wrap-around of int64 multiplication, which
``tests/test_corruptions_api.py`` checks against a pure-Python reference.
"""
from __future__ import annotations

import hashlib

import numpy as np
import torch

from ._jit import kernel

GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
_MASK64 = (1 << 64) - 1


def _signed(v: int) -> int:
    v &= _MASK64
    return v - (1 << 64) if v >= (1 << 63) else v


_GOLDEN_S = _signed(GOLDEN)
_M1_S = _signed(_M1)
_M2_S = _signed(_M2)
_STREAM_STRIDE = 1 << 32
_CHUNK_ELEMS = 1 << 17  # elements per internal block (keeps the int64 temporaries in cache)


def mix64(z: torch.Tensor, tmp: torch.Tensor | None = None) -> torch.Tensor:
    """SplitMix64 finaliser on an int64 tensor (in place; ``tmp`` is an optional scratch buffer)."""
    if tmp is None:
        tmp = torch.empty_like(z)
    for shift, mult in ((30, _M1_S), (27, _M2_S), (31, None)):
        torch.bitwise_right_shift(z, shift, out=tmp)
        tmp.bitwise_and_((1 << (64 - shift)) - 1)  # logical shift: clear the sign-extended bits
        z.bitwise_xor_(tmp)
        if mult is not None:
            z.mul_(mult)
    return z


def mix64_py(z: int) -> int:
    """Pure-Python reference of :func:`mix64` (unsigned)."""
    z &= _MASK64
    z ^= z >> 30
    z = (z * _M1) & _MASK64
    z ^= z >> 27
    z = (z * _M2) & _MASK64
    z ^= z >> 31
    return z


def base_key(seed: int, name: str, severity: int, prefix: str = "cifar-c") -> int:
    """64-bit key of (regime, seed, corruption, severity), as a signed int64 value; ``prefix`` is the regime's key
    (``Regime.key``: cifar-c, tiny-imagenet-c, imagenet-c), so each regime has its own draws."""
    digest = hashlib.blake2b(f"{prefix}|{int(seed)}|{name}|{int(severity)}".encode(), digest_size=8).digest()
    return _signed(int.from_bytes(digest, "little"))


def image_keys(base: int, indices: torch.Tensor) -> torch.Tensor:
    """Per-image keys ``mix(base + mix(index + GOLDEN))`` for an int64 tensor of global indices."""
    z = indices.to(torch.int64).clone()
    z.add_(_GOLDEN_S)
    mix64(z)
    z.add_(base)
    return mix64(z)


@kernel
def keyed_word(key, offset, j):
    """Word ``j`` (0-based) of the stream at ``offset`` (= stream * 2**32, uint64) of an image key (uint64):
    mix(key + (offset + j + 1) * GOLDEN). uint64 arithmetic wraps and shifts logically, so this is the SplitMix64
    construction literally; the CPU kernels that need one draw per element call it inline."""
    z = key + (offset + np.uint64(j + 1)) * np.uint64(GOLDEN)
    z ^= z >> np.uint64(30)
    z *= np.uint64(_M1)
    z ^= z >> np.uint64(27)
    z *= np.uint64(_M2)
    z ^= z >> np.uint64(31)
    return z


def stream_offset(stream: int) -> np.uint64:
    """The counter offset of stream ``stream`` for :func:`keyed_word`."""
    return np.uint64(stream * _STREAM_STRIDE)


@kernel
def uniform_row(key, offset, out: np.ndarray) -> None:
    """out[j] = word j of the stream at ``offset`` of ``key`` as a uniform: (top 53 bits + 0.5) / 2**53 in float64
    (the values of :func:`uniform_from_keys`; CPU kernels that need one image's draws make them with this)."""
    s11 = np.uint64(11)
    for j in range(out.shape[0]):
        out[j] = (float(keyed_word(key, offset, j) >> s11) + 0.5) * 2.0**-53


@kernel
def _uniform_kernel(keys: np.ndarray, count: int, offset, out: np.ndarray) -> None:
    """:func:`uniform_row` of every key into the rows of ``out`` (N, count) float64."""
    for i in range(keys.shape[0]):
        uniform_row(keys[i], offset, out[i, :count])


def _uniform_cpu(keys: torch.Tensor, count: int, stream: int, out: torch.Tensor) -> torch.Tensor:
    """The CPU path of :func:`uniform_from_keys`: one compiled pass (same values as the int64 torch version)."""
    _uniform_kernel(keys.contiguous().numpy().view(np.uint64), count, stream_offset(stream), out.numpy())
    return out


def uniform_from_keys(keys: torch.Tensor, count: int, stream: int = 0) -> torch.Tensor:
    """(N, count) uniforms in (0, 1): element [i, j] is word j of stream ``stream`` of image key i."""
    n = keys.shape[0]
    out = torch.empty((n, count), dtype=torch.float64, device=keys.device)
    if n == 0 or count == 0:
        return out
    if keys.device.type == "cpu":
        return _uniform_cpu(keys, count, stream, out)
    ctr = torch.arange(1, count + 1, dtype=torch.int64, device=keys.device)
    ctr.add_(stream * _STREAM_STRIDE)
    ctr.mul_(_GOLDEN_S)
    rows = max(1, _CHUNK_ELEMS // count) if keys.device.type == "cpu" else n
    z = torch.empty((min(rows, n), count), dtype=torch.int64, device=keys.device)
    tmp = torch.empty_like(z)
    for r0 in range(0, n, rows):
        k = keys[r0 : r0 + rows]
        zz, tt = z[: k.shape[0]], tmp[: k.shape[0]]
        torch.add(k[:, None], ctr[None, :], out=zz)
        mix64(zz, tt)
        torch.bitwise_right_shift(zz, 11, out=tt)
        tt.bitwise_and_((1 << 53) - 1)
        o = out[r0 : r0 + rows]
        o.copy_(tt)
        o.add_(0.5).mul_(2.0**-53)
    return out


class KeyedRandom:
    """The random source of one (seed, corruption, severity) call over a batch of images.

    ``uniform(count, stream)`` gives an (N, count) float64 tensor on ``device``; each row depends only on
    that image's global index, so slicing the batch slices the draws.
    """

    def __init__(self, seed: int, name: str, severity: int, indices, device="cpu", prefix: str = "cifar-c"):
        self.seed, self.name, self.severity = int(seed), name, int(severity)
        idx = torch.as_tensor(np.asarray(indices, dtype=np.int64))
        self.indices = idx
        self.base = base_key(seed, name, severity, prefix)
        self.keys = image_keys(self.base, idx.to(device))
        self._keys_cpu = None

    @property
    def n(self) -> int:
        return int(self.keys.shape[0])

    @property
    def device(self) -> torch.device:
        return self.keys.device

    def uniform(self, count: int, stream: int = 0) -> torch.Tensor:
        return uniform_from_keys(self.keys, count, stream)

    def uniform_cpu(self, count: int, stream: int = 0) -> np.ndarray:
        """Small per-image draws (angles, offsets, ...) as a float64 NumPy array computed on the CPU."""
        return uniform_from_keys(self._cpu_keys(), count, stream).numpy()

    def keys_u64(self) -> np.ndarray:
        """The image keys as a uint64 NumPy array (CPU), for kernels that draw inline with :func:`keyed_word`."""
        return self._cpu_keys().contiguous().numpy().view(np.uint64)

    def _cpu_keys(self) -> torch.Tensor:
        """The image keys on the CPU (copied once when they live on another device)."""
        if self._keys_cpu is None:
            self._keys_cpu = self.keys.cpu()
        return self._keys_cpu

    def subset(self, sl: slice) -> "KeyedRandom":
        other = object.__new__(KeyedRandom)
        other.seed, other.name, other.severity, other.base = self.seed, self.name, self.severity, self.base
        other.indices = self.indices[sl]
        other.keys = self.keys[sl]
        other._keys_cpu = None
        return other
