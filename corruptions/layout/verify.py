"""Compare a regenerated directory with an official one, per corruption and severity."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import CorruptionError
from .read import list_available, load_corrupted


def verify_against(regen_dir: str | os.PathLike, official_dir: str | os.PathLike, *,
                   chunk: int = 2000, n_clean_official: int | None = None):
    """Per corruption and severity present in both directories: pixel statistics of the regenerated block
    against the official one (a pandas DataFrame).

    Rows are compared image by image over the first ``min(N_regen, N_official)`` images, which is right when
    both were made from the same clean images in the same order (a ``--limit N`` regeneration uses the first N).
    Columns: mean and std of each, mean difference, mean absolute difference, max absolute difference,
    fraction of identical bytes, fraction within +-1, PSNR (dB; inf when identical), and ``comparison``:
    "bytewise" for the deterministic corruptions (should be identical up to library rounding) and
    "distributional" for the random ones (only means/stds are expected to agree: the draws differ).
    """
    import pandas as pd
    try:
        from .. import registry
        specs = registry.CORRUPTIONS
    except ImportError:  # pragma: no cover - the registry is part of the package
        specs = {}
    regen, off = Path(regen_dir), Path(official_dir)
    have_r, have_o = list_available(regen), list_available(off)
    common = [c for c in have_r if c in have_o]
    if not common:
        raise CorruptionError(f"no corruption is present in both {regen} and {off}")
    rows = []
    labels_checked: bool | None = None
    for c in common:
        sevs = [s for s in have_r[c] if s in have_o[c]]
        random = getattr(specs.get(c), "random", None)
        for s in sevs:
            xr, yr = load_corrupted(regen, c, s)
            xo, yo = load_corrupted(off, c, s, n_clean=n_clean_official)
            k = min(len(xr), len(xo))
            if xr.shape[1:] != xo.shape[1:]:
                raise CorruptionError(f"{c}: image size {xr.shape[1:]} vs {xo.shape[1:]}")
            if yr is not None and yo is not None and labels_checked is None:
                labels_checked = bool(np.array_equal(yr[:k], yo[:k]))
            acc = np.zeros(9)
            mx = 0
            for i in range(0, k, chunk):
                a = xr[i:i + chunk].astype(np.float64)
                b = xo[i:i + chunk].astype(np.float64)
                dlt = a - b
                acc += [a.sum(), (a * a).sum(), b.sum(), (b * b).sum(), dlt.sum(), np.abs(dlt).sum(),
                        (dlt == 0).sum(), (np.abs(dlt) <= 1).sum(), (dlt * dlt).sum()]
                mx = max(mx, int(np.abs(dlt).max()))
            cnt = float(k * np.prod(xr.shape[1:]))
            mr, mo = acc[0] / cnt, acc[2] / cnt
            mse = acc[8] / cnt
            rows.append({
                "corruption": c, "severity": s,
                "comparison": "distributional" if random else "bytewise" if random is not None else "unknown",
                "n_compared": k,
                "mean_regen": mr, "mean_official": mo,
                "std_regen": float(np.sqrt(max(acc[1] / cnt - mr * mr, 0.0))),
                "std_official": float(np.sqrt(max(acc[3] / cnt - mo * mo, 0.0))),
                "mean_diff": acc[4] / cnt, "mean_abs_diff": acc[5] / cnt, "max_abs_diff": mx,
                "identical_fraction": acc[6] / cnt, "within_1_fraction": acc[7] / cnt,
                "psnr_db": float("inf") if mse == 0 else float(10 * np.log10(255.0 ** 2 / mse)),
            })
    df = pd.DataFrame(rows)
    df.attrs["labels_identical"] = labels_checked
    df.attrs["regen_dir"], df.attrs["official_dir"] = str(regen), str(off)
    return df
