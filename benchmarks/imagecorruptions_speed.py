"""Images/s of this suite's ``corruptions`` vs bethgelab's ``imagecorruptions``, same photographs, 224 and 64 px.

    python benchmarks/imagecorruptions_speed.py --ic-python /tmp/icvenv/bin/python            # issue 20, item 4
    python benchmarks/imagecorruptions_speed.py --ic-python /tmp/icvenv/bin/python --n 512 --n-ic 20 --json out.json
    python benchmarks/imagecorruptions_speed.py --n 8 --n-ic 4 --corruptions gaussian_noise,contrast,fog --sizes 64

Images: real photographs from scikit-image's ``skimage.data`` (astronaut, coffee, chelsea, rocket, ...), resized
as ImageNet-C's generator does (shorter side to 256, centre crop 224) for 224 px and centre-square-cropped and
resized to 64 px for 64 px (PIL bilinear), tiled to N images. Both packages get the identical uint8 arrays (written
to a temporary .npy file that the imagecorruptions side reads).

Suite: ``corruptions.corrupt`` on the whole batch per severity (CPU; also the CUDA path when torch sees a GPU), with
the ImageNet constants at 224 px and (by default) the Tiny-ImageNet constants at 64 px. imagecorruptions: one
``imagecorruptions.corrupt(img, corruption_name=..., severity=...)`` call per image, in its own interpreter
(``--ic-python``, e.g. a venv with imagecorruptions installed; default: this interpreter if it can import it,
else that side is skipped). imagecorruptions always uses the ImageNet constants, at any size.

Both sides run with the same thread count (``--threads``, default all cores): OMP/MKL/OpenBLAS env variables are
set before numpy/torch are imported, torch.set_num_threads and cv2.setNumThreads likewise. Each (corruption,
severity) gets one warm-up call before it is timed. Throughput is per image, so the two sides may time different
numbers of images (imagecorruptions is far slower: ``--n-ic``, ``--ic-budget``). Timings cover the corruption only
(no decoding of inputs, no JPEG-85 encoding of outputs).

Rounds (``--rounds``, default 3): each round times the suite, then imagecorruptions, at one size; the ratio per
corruption is the median of the per-round ratios and the img/s columns are medians over rounds. Both sides are
timed minutes apart within a round, so a machine that changes speed between rounds (a shared VM does) moves both;
the per-round geometric means are printed beside the median so the spread is visible.

Targets (issue 20): geometric mean of suite/imagecorruptions over the 15 benchmark corruptions >= 20x at 224 px,
and the full ImageNet-C regeneration (50,000 images x 15 corruptions x 5 severities at 224 px), extrapolated from the
suite's CPU throughput, <= 12 h. Exit status 1 when a target that could be evaluated is missed, 2 for bad arguments.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field", "immunohistochemistry", "retina")
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
              "VECLIB_MAXIMUM_THREADS")
IMAGENET_C_IMAGES = 50_000
TARGET_RATIO = 20.0
TARGET_HOURS = 12.0
REGIME_BY_SIZE = {224: "imagenet"}


def set_thread_env(threads: int) -> None:
    """Thread count for OpenMP / MKL / OpenBLAS: must run before numpy or torch is imported."""
    for key in THREAD_ENV:
        os.environ[key] = str(threads)


def parse_severities_text(text: str) -> list[int]:
    """'1-5' or '1,3,5' -> severities (kept dependency-free: the imagecorruptions side has no suite installed)."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    if not out or any(s < 1 or s > 5 for s in out):
        raise ValueError(f"severities must lie in 1..5, got {text!r}")
    return out


# ---------------------------------------------------------------------------------------------------------------
# imagecorruptions side: runs in the interpreter given by --ic-python (numpy + imagecorruptions only, no torch)
# ---------------------------------------------------------------------------------------------------------------

def ic_versions() -> dict:
    from importlib import metadata
    out = {"python": platform.python_version()}
    for dist in ("imagecorruptions", "numpy", "scipy", "scikit-image", "opencv-python-headless", "opencv-python",
                 "Pillow"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def ic_time_one(corrupt, images, name: str, sevs: list[int], budget: float) -> dict:
    """Warm-up call per severity, then image-major over all severities until ``budget`` seconds have passed."""
    for s in sevs:
        corrupt(images[0], corruption_name=name, severity=s)
    done, t0, c0 = 0, time.perf_counter(), time.process_time()
    for img in images:
        for s in sevs:
            corrupt(img, corruption_name=name, severity=s)
        done += 1
        if budget > 0 and time.perf_counter() - t0 > budget:
            break
    dt = time.perf_counter() - t0
    return {"images": done, "calls": done * len(sevs), "seconds": dt, "cpu_seconds": time.process_time() - c0,
            "images_per_s": done * len(sevs) / dt}


def numpy_shims(np) -> list[str]:
    """imagecorruptions 1.1.2's fog uses ``np.float_``, removed in NumPy 2.0: alias it to float64 (the same type)."""
    if "float_" in np.__dict__:
        return []
    np.float_ = np.float64
    return ["np.float_ = np.float64 (NumPy >= 2 removed the alias; fog uses it)"]


def skimage_shims(imagecorruptions) -> list[str]:
    """imagecorruptions 1.1.2 calls ``skimage.filters.gaussian(..., multichannel=True)`` (gaussian_blur, glass_blur);
    scikit-image >= 0.20 only takes ``channel_axis=-1``, which means the same: translate the keyword."""
    import inspect

    mod = imagecorruptions.corruptions
    if "multichannel" in inspect.signature(mod.gaussian).parameters:
        return []
    original = mod.gaussian

    def gaussian(image, *a, multichannel=None, **kw):
        if multichannel:
            kw.setdefault("channel_axis", -1)
        return original(image, *a, **kw)

    mod.gaussian = gaussian
    return ["skimage.filters.gaussian(multichannel=True) -> channel_axis=-1 (scikit-image >= 0.20 removed it)"]


def ic_worker(args) -> int:
    """Time imagecorruptions on the images in ``args.ic_worker``; write a JSON result to ``args.ic_out``."""
    set_thread_env(args.threads)
    import numpy as np
    shims = numpy_shims(np)
    try:
        import imagecorruptions
    except ImportError as e:
        Path(args.ic_out).write_text(json.dumps({"error": f"cannot import imagecorruptions: {e}"}))
        return 0
    shims += skimage_shims(imagecorruptions)
    try:
        import cv2
        cv2.setNumThreads(args.threads)
    except ImportError:
        pass
    np.random.seed(0)
    images = np.load(args.ic_worker)
    sevs = parse_severities_text(args.severities)
    rows = {}
    for name in args.corruptions.split(","):
        try:
            rows[name] = ic_time_one(imagecorruptions.corrupt, images, name, sevs, args.ic_budget)
        except Exception as e:  # noqa: BLE001 - one corruption failing (e.g. frost files) must not lose the rest
            rows[name] = {"error": f"{type(e).__name__}: {e}"}
    Path(args.ic_out).write_text(json.dumps({"versions": ic_versions(), "rows": rows, "shims": shims,
                                             "names": imagecorruptions.get_corruption_names("all")}))
    return 0


# ---------------------------------------------------------------------------------------------------------------
# driver (this suite's interpreter)
# ---------------------------------------------------------------------------------------------------------------

def photographs(size: int, n: int):
    """``n`` uint8 (size, size, 3) photographs from skimage.data, tiled; and the names used."""
    import numpy as np
    from PIL import Image
    from skimage import data

    imgs, used = [], []
    for name in PHOTOS:
        try:
            arr = getattr(data, name)()
        except Exception:  # noqa: BLE001 - a sample that needs a download is skipped
            continue
        im = Image.fromarray(np.ascontiguousarray(arr[..., :3]).astype(np.uint8)).convert("RGB")
        w, h = im.size
        if size == 224:  # ImageNet-C's input step: Resize(256) on the shorter side, CenterCrop(224)
            s = 256 / min(w, h)
            im = im.resize((max(256, round(w * s)), max(256, round(h * s))), Image.BILINEAR)
        else:            # centre square, resized
            side = min(w, h)
            im = im.crop(((w - side) // 2, (h - side) // 2, (w - side) // 2 + side, (h - side) // 2 + side))
            im = im.resize((size, size), Image.BILINEAR)
        w, h = im.size
        left, top = (w - size) // 2, (h - size) // 2
        imgs.append(np.asarray(im.crop((left, top, left + size, top + size)), dtype=np.uint8))
        used.append(name)
    if not imgs:
        raise RuntimeError("no skimage.data photograph could be loaded")
    x = np.stack(imgs)
    reps = -(-n // len(x))
    return np.ascontiguousarray(np.tile(x, (reps, 1, 1, 1))[:n]), used


def machine(threads: int) -> dict:
    """The machine the timings come from (CPU model, cores, threads, platform)."""
    # imported here, not at the top: the top level imports the standard library only (main() first sets the
    # thread variables, then puts the repository on sys.path)
    from robustbench_dgsa.util.provenance import cpu_model
    model = cpu_model()
    avail = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": model, "cores": os.cpu_count(), "cores_available": avail, "threads": threads,
            "platform": platform.platform()}


def loadavg() -> list[float]:
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else []


def suite_time(x, names, sevs, regime: str, device: str, frost) -> dict:
    """images/s of ``corruptions.corrupt`` per corruption on the whole batch, after one warm-up call per severity."""
    import torch
    import corruptions as C

    xin = torch.from_numpy(x).to(device) if device == "cuda" else x
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    rows = {}
    for name in names:
        for s in sevs:
            C.corrupt(xin[: min(len(x), 2)], name, s, constants=regime, frost=frost)
        sync()
        t, c = time.perf_counter(), time.process_time()
        for s in sevs:
            C.corrupt(xin, name, s, constants=regime, frost=frost)
        sync()
        dt = time.perf_counter() - t
        rows[name] = {"images": len(x), "calls": len(sevs), "seconds": dt, "cpu_seconds": time.process_time() - c,
                      "images_per_s": len(x) * len(sevs) / dt}
    return rows


def ic_run(ic_python: str, x, names, sevs, args) -> dict:
    """Time imagecorruptions in ``ic_python`` (a subprocess of this script) on the first ``--n-ic`` images of ``x``."""
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="icspeed-") as tmp:
        img_path, out_path = Path(tmp) / "images.npy", Path(tmp) / "result.json"
        np.save(img_path, x[: args.n_ic])
        env = dict(os.environ)
        env.update({k: str(args.threads) for k in THREAD_ENV})
        env.pop("PYTHONPATH", None)  # its own environment: nothing of this suite
        cmd = [ic_python, str(Path(__file__).resolve()), "--ic-worker", str(img_path), "--ic-out", str(out_path),
               "--corruptions", ",".join(names), "--severities", ",".join(map(str, sevs)),
               "--threads", str(args.threads), "--ic-budget", str(args.ic_budget)]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0 or not out_path.is_file():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            return {"error": f"{ic_python} failed (exit {proc.returncode}): {tail[0]}"}
        return json.loads(out_path.read_text())


def find_ic_python(given: str | None) -> tuple[str | None, str]:
    """The interpreter that runs imagecorruptions, or None and why not."""
    import importlib.util

    if given:
        return given, ""
    if importlib.util.find_spec("imagecorruptions") is not None:
        return sys.executable, ""
    return None, ("imagecorruptions is not importable in this interpreter and no --ic-python was given: "
                  "its side is SKIPPED (e.g. python3 -m venv /tmp/icvenv && /tmp/icvenv/bin/pip install "
                  "imagecorruptions; then --ic-python /tmp/icvenv/bin/python)")


def geomean(values: list[float]) -> float:
    import math
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def median(values: list[float]) -> float:
    v = sorted(values)
    k = len(v) // 2
    return v[k] if len(v) % 2 else (v[k - 1] + v[k]) / 2


def merge_rounds(rounds: list[dict]) -> dict:
    """One row per corruption from the rows of several rounds: the median images/s, each round's figure kept."""
    out = {}
    for name in rounds[0]:
        rows = [r[name] for r in rounds if "images_per_s" in r.get(name, {})]
        if len(rows) < len(rounds):
            out[name] = next((r[name] for r in rounds if "error" in r.get(name, {})), {"error": "missing round"})
            continue
        out[name] = {**rows[0], "images_per_s": median([r["images_per_s"] for r in rows]),
                     "rounds_images_per_s": [r["images_per_s"] for r in rows]}
    return out


def round_ratios(suite_rounds: list[dict], ic_rounds: list[dict]) -> dict:
    """Per corruption, suite / imagecorruptions within each round (both sides timed minutes apart, not hours)."""
    out = {}
    for name in suite_rounds[0]:
        pairs = [(s[name], i.get(name, {})) for s, i in zip(suite_rounds, ic_rounds)]
        if all("images_per_s" in a and "images_per_s" in b for a, b in pairs):
            out[name] = [a["images_per_s"] / b["images_per_s"] for a, b in pairs]
    return out


def summarise(size_res: dict, benchmark: list[str]) -> dict:
    """Ratios per corruption (the median of the per-round ratios), their geometric mean over the benchmark
    corruptions (also per round), and the ImageNet-C projection (from the median suite throughput)."""
    out = {}
    for dev, rows in size_res["suite"].items():
        per_round = size_res.get("round_ratios", {}).get(dev, {})
        ratios = {n: median(v) for n, v in per_round.items()}
        bench = [ratios[n] for n in benchmark if n in ratios]
        rounds = len(next(iter(per_round.values()), []))
        round_gm = [geomean([per_round[n][r] for n in benchmark if n in per_round]) for r in range(rounds)]
        timed = [n for n in benchmark if n in rows]
        hours = (sum(IMAGENET_C_IMAGES * 5 / rows[n]["images_per_s"] for n in benchmark) / 3600
                 if len(timed) == len(benchmark) else None)
        out[dev] = {"ratios": ratios, "geomean_benchmark": geomean(bench) if bench else None,
                    "geomean_count": len(bench), "geomean_per_round": round_gm, "imagenet_c_hours": hours}
    return out


def print_size(size: int, res: dict, names: list[str], benchmark: list[str]) -> None:
    devs = list(res["suite"])
    ic = res.get("imagecorruptions", {})
    ic_rows = ic.get("rows", {})
    print(f"\n{size} px: suite constants {res['regime']!r} (imagecorruptions: its ImageNet constants); suite "
          f"{res['n']} images, imagecorruptions {ic.get('n', 0)} images (throughput is per image, so different N "
          f"are comparable)")
    head = "".join(f" {'suite ' + d + ' img/s':>18s}" for d in devs) + f" {'imagecorr. img/s':>17s}"
    head += "".join(f" {'ratio ' + d:>11s}" for d in devs)
    print(f"{'corruption':20s}{head}")
    for n in names:
        line = "".join(f" {res['suite'][d][n]['images_per_s']:18.1f}" for d in devs)
        icr = ic_rows.get(n, {})
        line += f" {icr['images_per_s']:17.2f}" if "images_per_s" in icr else f" {'-':>17s}"
        line += "".join(f" {res['summary'][d]['ratios'][n]:10.1f}x" if n in res["summary"][d]["ratios"]
                        else f" {'-':>11s}" for d in devs)
        print(f"{n + ('' if n in benchmark else ' (extra)'):20s}{line}")
        if "error" in icr:
            print(f"{'':20s} imagecorruptions failed: {icr['error']}")
    for d in devs:
        s = res["summary"][d]
        gm = f"{s['geomean_benchmark']:.1f}x" if s["geomean_benchmark"] else "n/a"
        per_round = ", ".join(f"{g:.1f}x" for g in s.get("geomean_per_round", []))
        print(f"geometric mean suite {d} / imagecorruptions over {s['geomean_count']} of the {len(benchmark)} "
              f"benchmark corruptions at {size} px: {gm} (median ratio per corruption over {res['rounds']} rounds; "
              f"per round: {per_round or 'n/a'})")


def verdict(results: dict, benchmark: list[str]) -> tuple[list[str], bool]:
    """Lines on the two targets (CPU, 224 px) and whether one that could be evaluated was missed."""
    lines, missed = [], False
    res = results.get("224")
    if res is None:
        return ["targets: not evaluated (224 px not timed)"], False
    s = res["summary"]["cpu"]
    if s["geomean_benchmark"] is not None and s["geomean_count"] == len(benchmark):
        ok = s["geomean_benchmark"] >= TARGET_RATIO
        missed |= not ok
        lines.append(f"target >= {TARGET_RATIO:.0f}x imagecorruptions (geometric mean, 15 benchmark corruptions, "
                     f"224 px, CPU): {s['geomean_benchmark']:.1f}x -> {'MET' if ok else 'NOT MET'}")
    else:
        lines.append(f"target >= {TARGET_RATIO:.0f}x: NOT EVALUATED (ratios for {s['geomean_count']} of the "
                     f"{len(benchmark)} benchmark corruptions)")
    for dev, sd in res["summary"].items():
        if sd["imagenet_c_hours"] is None:
            lines.append(f"ImageNet-C regeneration ({dev}): NOT EVALUATED (needs all 15 benchmark corruptions)")
            continue
        ok = sd["imagenet_c_hours"] <= TARGET_HOURS
        if dev == "cpu":
            missed |= not ok
        lines.append(f"ImageNet-C regeneration extrapolated ({IMAGENET_C_IMAGES:,} x 15 x 5 at 224 px, {dev}, "
                     f"corruption only): {sd['imagenet_c_hours']:.2f} h"
                     + (f" -> target <= {TARGET_HOURS:.0f} h {'MET' if ok else 'NOT MET'}" if dev == "cpu" else ""))
    return lines, missed


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=256, help="images per size for the suite (default 256)")
    ap.add_argument("--n-ic", type=int, default=20, help="images per size for imagecorruptions (default 20)")
    ap.add_argument("--ic-budget", type=float, default=0.0,
                    help="seconds per corruption and size after which imagecorruptions stops (after a whole image, "
                         "all severities); 0 = no limit (default)")
    ap.add_argument("--ic-python", default=None,
                    help="interpreter with imagecorruptions installed (default: this one if it can import it, "
                         "else that side is skipped)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds per size, each timing the suite then imagecorruptions; figures are medians over "
                         "rounds, a ratio the median of the per-round ratios (default 3)")
    ap.add_argument("--sizes", default="224,64", help="image sizes, from 224 and 64 (default 224,64)")
    ap.add_argument("--constants-64", choices=["tiny-imagenet", "imagenet"], default="tiny-imagenet",
                    help="the suite's constants at 64 px (default tiny-imagenet; imagecorruptions uses imagenet)")
    ap.add_argument("--corruptions", default="all", help="names, benchmark, extra or all (default all 19)")
    ap.add_argument("--severities", default="1-5")
    ap.add_argument("--device", choices=["cpu", "cuda", "all"], default="all",
                    help="suite devices: cpu, cuda, or all available (default)")
    ap.add_argument("--frost-dir", default=None, help="frost textures for the suite (default as corruption_speed)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                    help="threads for both packages (default: all cores)")
    ap.add_argument("--json", default=None, help="write the results as JSON to this file ('-': stdout, no table)")
    ap.add_argument("--ic-worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--ic-out", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.threads < 1 or args.n < 1 or args.n_ic < 1 or args.rounds < 1:
        ap.error("--threads, --n, --n-ic and --rounds must be >= 1")
    try:
        args.size_list = [int(s) for s in args.sizes.split(",")]
        parse_severities_text(args.severities)
    except ValueError as e:
        ap.error(str(e))
    if any(s not in (224, 64) for s in args.size_list):
        ap.error("--sizes takes 224 and/or 64")
    if args.ic_python and not shutil.which(args.ic_python):
        ap.error(f"--ic-python {args.ic_python}: no such executable")
    return args


def run_all(args, out) -> dict:
    """Time both sides at every size; returns the JSON-able result."""
    import numpy as np
    import torch
    import corruptions as C

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from corruption_speed import load_frost

    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore", C.SizeWarning)  # --constants-64 imagenet applies them to 64 px on purpose
    names = C.resolve_corruptions(args.corruptions)
    sevs = parse_severities_text(args.severities)
    frost = load_frost(args.frost_dir)
    devices = ["cpu"] + (["cuda"] if args.device != "cpu" and torch.cuda.is_available() else [])
    if args.device == "cuda":
        devices = devices[1:]
    ic_python, why = find_ic_python(args.ic_python)
    result = {"machine": machine(args.threads), "loadavg_before": loadavg(), "severities": sevs,
              "corruptions": names, "versions": {"torch": torch.__version__, "numpy": np.__version__,
                                                 "python": platform.python_version()},
              "ic_python": ic_python, "ic_skipped": why or None, "frost": frost.source, "sizes": {}}
    if "cuda" in devices:
        result["machine"]["gpu"] = torch.cuda.get_device_name(0)
    for size in args.size_list:
        x, used = photographs(size, max(args.n, args.n_ic))
        regime = REGIME_BY_SIZE.get(size, args.constants_64)
        suite_rounds, ic_rounds = [], []
        for _ in range(args.rounds):  # suite, then imagecorruptions, per round: machine drift hits both sides
            suite_rounds.append({d: suite_time(x[: args.n], names, sevs, regime, d, frost) for d in devices})
            if ic_python:
                ic = ic_run(ic_python, x, names, sevs, args)
                if "error" in ic:
                    raise RuntimeError(ic["error"])
                ic_rounds.append(ic)
        res = {"regime": regime, "n": args.n, "photographs": used, "rounds": args.rounds,
               "suite": {d: merge_rounds([r[d] for r in suite_rounds]) for d in devices}}
        if ic_python:
            res["imagecorruptions"] = {"n": args.n_ic, **ic, "rows": merge_rounds([i["rows"] for i in ic_rounds])}
            res["round_ratios"] = {d: round_ratios([r[d] for r in suite_rounds], [i["rows"] for i in ic_rounds])
                                   for d in devices}
            result["versions"]["imagecorruptions_side"] = ic["versions"]
            result["ic_shims"] = ic.get("shims", [])
        res["summary"] = summarise(res, [n for n in C.BENCHMARK])
        result["sizes"][str(size)] = res
        if out:
            print_size(size, res, names, list(C.BENCHMARK))
    result["loadavg_after"] = loadavg()
    return result


def print_header(args, out_json: bool) -> None:
    if out_json:
        return
    m = machine(args.threads)
    print(f"machine: {m['cpu']}; {m['cores']} cores ({m['cores_available']} available); threads {args.threads} "
          f"for both packages; load average before {', '.join(f'{v:.2f}' for v in loadavg())}")


def main(argv=None) -> int:
    args = parse_args(argv)
    set_thread_env(args.threads)
    if args.ic_worker:
        return ic_worker(args)
    sys.path.insert(0, str(REPO))
    to_stdout = args.json == "-"
    print_header(args, to_stdout)
    try:
        result = run_all(args, out=not to_stdout)
    except (RuntimeError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    import corruptions as C
    lines, missed = verdict(result["sizes"], list(C.BENCHMARK))
    result["verdict"] = {"lines": lines, "target_missed": missed}
    if to_stdout:
        print(json.dumps(result, indent=2))
    else:
        print_footer(result, lines)
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2))
    return 1 if missed else 0


def print_footer(result: dict, lines: list[str]) -> None:
    v = result["versions"]
    ic = v.get("imagecorruptions_side")
    if result["ic_skipped"]:
        print(f"\n{result['ic_skipped']}")
    print(f"\nversions: suite side torch {v['torch']}, numpy {v['numpy']}, python {v['python']}"
          + (f"; imagecorruptions side ({result['ic_python']}): "
             + ", ".join(f"{k} {val}" for k, val in ic.items()) if ic else ""))
    print(f"frost textures (suite): {result['frost']}")
    for shim in result.get("ic_shims") or []:
        print(f"imagecorruptions compatibility shim (same computation, newer library): {shim}")
    print(f"load average before {', '.join(f'{x:.2f}' for x in result['loadavg_before'])}; after "
          f"{', '.join(f'{x:.2f}' for x in result['loadavg_after'])} (on {result['machine']['cores']} cores: a load "
          f"above the thread count means other processes shared the CPU and the numbers are pessimistic)")
    for line in lines:
        print(line)


if __name__ == "__main__":
    raise SystemExit(main())
