"""Runs imagecorruptions as a black box in its own interpreter (IC_PYTHON / /tmp/icvenv): reads a request .npz,
writes the outputs (or the exception type of each call) to a result .npz. Shims only what newer libraries removed
(np.float_, skimage's multichannel keyword), as benchmarks/imagecorruptions_speed.py does. Used by test_compat.py.

request: image (H, W[, C]) uint8, calls: JSON list of [label, kwargs] for corrupt(image, **kwargs);
optional seeded: JSON list of [label, name, severity, seed(, image key)] (np.random.seed(seed) first; records the
draws of np.random.uniform / normal / randint as <label>/draw<k>/<kind>).
"""
import json
import sys

import numpy as np

np.float_ = np.float64
import skimage.filters  # noqa: E402

_gaussian = skimage.filters.gaussian


def _gaussian_shim(image, *a, multichannel=None, **kw):
    if multichannel:
        kw.setdefault("channel_axis", -1)
    return _gaussian(image, *a, **kw)


skimage.filters.gaussian = _gaussian_shim
import imagecorruptions  # noqa: E402
import imagecorruptions.corruptions  # noqa: E402

imagecorruptions.corruptions.gaussian = _gaussian_shim
_draws = []
for _name in ("uniform", "normal", "randint"):
    _f = getattr(np.random, _name)

    def _wrap(*a, _f=_f, _n=_name, **kw):
        r = _f(*a, **kw)
        _draws.append((_n, np.asarray(r, dtype=np.float64)))
        return r

    setattr(np.random, _name, _wrap)


def main(req_path: str, out_path: str) -> None:
    req = np.load(req_path)
    image = req["image"]
    out, meta = {}, {}
    for label, kwargs in json.loads(str(req["calls"])):
        img = image if "image" not in kwargs else req[kwargs.pop("image")]
        try:
            out[label] = imagecorruptions.corrupt(img, **kwargs)
            meta[label] = "ok"
        except Exception as e:  # noqa: BLE001 - the type is what is compared
            meta[label] = type(e).__name__
    for label, name, severity, seed, *key in json.loads(str(req["seeded"])) if "seeded" in req else ():
        np.random.seed(seed)
        _draws.clear()
        out[label] = imagecorruptions.corrupt(req[key[0]] if key else image, severity=severity, corruption_name=name)
        for k, (kind, arr) in enumerate(_draws):
            out[f"{label}/draw{k}/{kind}"] = arr
        meta[label] = "ok"
    out["meta"] = np.array(json.dumps(meta))
    out["names"] = np.array(json.dumps([f.__name__ for f in imagecorruptions.corruption_tuple]))
    np.savez(out_path, **out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
