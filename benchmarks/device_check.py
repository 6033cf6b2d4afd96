#!/usr/bin/env python
"""GPU figures in one shot: correctness, speed, scale-out and a real run on one device, in under 6 minutes.

    PYTHONPATH=. python benchmarks/device_check.py                          # the full form on CUDA
    PYTHONPATH=. python benchmarks/device_check.py --only speed,realrun     # rerun a part
    PYTHONPATH=. python benchmarks/device_check.py --device cpu --quick     # the CPU smoke form (CI, < 2 min)
    python benchmarks/device_check.py --prepare                             # copy the carried data to .devdata/

With this workplace's device tool: ``--prepare`` here, then one call with ``carry=[".devdata"]``, a ``timeout_s``
of about 420 and the command ``PYTHONUNBUFFERED=1 PYTHONPATH=. python3 benchmarks/device_check.py --device cuda``
(the output folder is ``$OUT`` there: device_check.json, device_check.md and the four stage logs come back).

Runs from the checkout without installing; optional dependencies (timm) are imported lazily and skipped with a
note when absent. Each stage runs in a child process (this script with ``--stage NAME``) under a hard time limit:
a stage over its limit is killed (with its process group: torchrun and trainers too), recorded as timed out with
whatever figures it had written, and the next stage runs. ``device_check.json`` is rewritten atomically after
every stage (and a child rewrites its own partial result after every figure); at the end ``device_check.md``
holds a Markdown table (machine, GPU, driver, torch, each figure, each pass/fail), also printed. Output folder:
``--out``, else ``$OUT`` when set, else ``./device_check``; each stage's log is ``logs/<stage>.log`` there.

Stages (limits in seconds: ``LIMITS``, the full form's sum to 360 s; a stage also gets the time the stages before it
left unused, so the whole run stays within the sum):

1. correctness: every corruption on the device (its torch path) against the CPU kernels on the same inputs at
   32 / 64 / 224 px (fraction of bytes equal, max |diff|; the bound the code promises is the one of
   ``tests/corruptions_lib/test_corruptions_api.py::test_cuda_matches_cpu``: max |diff| <= 1 and < 0.1 % of
   bytes differing; bit identity is asserted where ``corruptions/rng.py`` promises it: the keyed random draws);
   the six models' logits, device fp32 (TF32 off) vs CPU fp64 (relative error <= 1e-4) and device bf16 autocast
   vs fp32 (<= 2e-2); two epochs of training vs one epoch + resume, bit-identical weights; the SDPA backend each
   attention path used (flash / mem-efficient / cudnn / math, from the profiler's aten operator names, default
   choice and each backend forced) and, at 1,024 tokens, the memory of a forward + backward of one attention
   layer against the bytes of one N x N map over all heads and the batch (fused: below it; explicit: above).
2. speed: training and inference images/s (bf16 autocast on CUDA) of ViT / DViT / DGViT at 32 px patch 4 and
   224 px patch 16 beside timm's ViT of the same size in the same run (benchmarks/vs_timm.py), training
   images/s and peak memory by the Table 9 meter (benchmarks/attention_speed.py), DGViT / ViT training
   throughput at 224/16 (the geometry of the paper's Table 9 and of reproduce's Table 9 note: D=256, 8 layers,
   8 heads, FFN x4, batch 64) beside the paper's 23.73 / 40.17 = 0.59 (A10G); the text models at 256 tokens;
   CIFAR-10-C regeneration and ImageNet-C (224 px) images/s per corruption on the device vs the CPU kernels
   (benchmarks/corruption_speed.py).
3. scaleout: ``torchrun --standalone --nproc_per_node 1`` of ``dgsa-bench train`` for a few steps (at world
   size 1 the suite joins no process group), and the backend itself (nccl on CUDA, gloo on the CPU) at world
   size 1 through the suite's DDP wrapper; with several GPUs both again with one process per GPU.
4. realrun: one epoch of the ``zoo`` preset (ViT, DViT, DGViT) on CIFAR-10 from the carried JPEG-75 copy
   (``.devdata/``, see ``--prepare``), or on synthetic data when it is absent (said in the output): time and
   test accuracy; and the projected wall time of ``reproduce --preset paper`` (5 seeds x 6 models) from the
   speed stage's measured throughput.

``--quick`` (with ``--device cpu``: the CPU smoke form) runs every stage's code path at tiny sizes.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
for _p in (REPO, REPO / "benchmarks"):      # the package and the sibling benchmark scripts, without installing
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

STAGES = ("correctness", "speed", "scaleout", "realrun")
# hard limits per stage (seconds): the full form's sum to 360 (6 minutes), the quick form's to 118
LIMITS = {"full": {"correctness": 110, "speed": 130, "scaleout": 45, "realrun": 75},
          "quick": {"correctness": 25, "speed": 21, "scaleout": 40, "realrun": 32}}
DEVDATA = REPO / ".devdata"
CARRIED = ("cifar10/cifar10-jpeg75.tar.xz", "cifar10/cifar10-test-exact-first1017.npz",
           "corruptions/frost/frost1.png", "corruptions/frost/frost2.png", "corruptions/frost/frost3.png",
           "corruptions/frost/frost4.jpg", "corruptions/frost/frost5.jpg", "corruptions/frost/LICENSE")


# ============================================================================================ the runner (parent)
def default_out() -> Path:
    return Path(os.environ["OUT"]) if os.environ.get("OUT") else Path("device_check")


def write_json_atomic(path: Path, doc: Any) -> None:
    """``doc`` as JSON at ``path``: written beside it, then renamed over it (a killed writer leaves the old file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict[str, Any]:
    """The machine without importing torch: host, CPU, cores, memory, load, and nvidia-smi's GPUs and driver."""
    info: dict[str, Any] = {"host": platform.node(), "os": platform.platform(), "python": platform.python_version(),
                            "cpu": _cpu_model(), "cores": os.cpu_count()}
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        info["memory_gib"] = round(pages * size / 2 ** 30, 1)
        info["load_average"] = [round(x, 2) for x in os.getloadavg()]
    except (ValueError, OSError, AttributeError):
        pass
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20).stdout
            gpus = [dict(zip(("name", "driver", "memory"), (c.strip() for c in line.split(","))))
                    for line in out.splitlines() if line.strip()]
            info["gpus"] = gpus
            info["driver"] = gpus[0]["driver"] if gpus else None
        except (OSError, subprocess.SubprocessError) as e:
            info["nvidia_smi_error"] = str(e)
    return info


# the distributions the suite needs (pyproject.toml) and timm (optional): the device machine has its own Python
PACKAGES = ("torch", "torchvision", "numpy", "scipy", "pandas", "pyarrow", "matplotlib", "seaborn", "typer", "rich",
            "safetensors", "pillow", "statsmodels", "opencv-python-headless", "numba", "filelock", "rapidfuzz", "timm")


def package_versions() -> dict[str, str | None]:
    """Installed version of each of :data:`PACKAGES` (None when absent), read from the metadata (no import)."""
    from importlib import metadata
    found: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the child's process group (the child and everything it started: torchrun, trainers)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def stage_command(name: str, args: argparse.Namespace, part: Path, json_path: Path) -> list[str]:
    """The child's command line: this script with --stage, writing its figures to ``part`` as it goes."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--stage", name, "--device", args.device,
           "--out", str(args.out), "--result", str(part), "--json-path", str(json_path)]
    return cmd + (["--quick"] if args.quick else [])


def run_stage(name: str, args: argparse.Namespace, limit: float, json_path: Path, work: Path) -> dict[str, Any]:
    """Run one stage in a child process under ``limit`` seconds; its record (figures so far, status, seconds).
    The child's running record lives in ``work`` (not in the output folder, which holds 6 files at most: the
    device machine returns few)."""
    out = Path(args.out)
    part = work / f"{name}.json"
    part.unlink(missing_ok=True)
    log = out / "logs" / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = stage_command(name, args, part, json_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO)] + [p for p in
                                                                        [os.environ.get("PYTHONPATH")] if p])}
    if args.quick:        # tiny sizes: one thread each (no thread wake-ups to wait for on a busy small machine)
        env.setdefault("OMP_NUM_THREADS", "1")
    t0, c0 = time.monotonic(), _children_cpu()
    with open(log, "w", encoding="utf-8") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            rc = proc.wait(timeout=limit)
            status = None
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            rc, status = None, "timed out"
    seconds, cpu_s = round(time.monotonic() - t0, 1), round(_children_cpu() - c0, 1)
    try:
        rec = json.loads(part.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        rec = {"rows": [], "data": {}, "notes": []}
    finished = status == "timed out" and rec.get("done")
    if finished:
        rec["notes"].append("all its checks had finished when the limit killed it (while exiting)")
    if status is None or finished:
        failed = any(r.get("ok") is False for r in rec["rows"])
        status = "error" if rc not in (0, None) else ("failed" if failed else "passed")
    if status == "error":
        rec["notes"].append(f"exit status {rc}; last lines of {log.name}: " + _tail(log))
    rec.update(status=status, seconds=seconds, cpu_s=cpu_s, limit_s=limit, exit_code=rc, log=str(log))
    return rec


def _children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children and theirs (a loaded machine stretches
    the wall time of a stage, not its CPU time)."""
    try:
        import resource
    except ImportError:        # not on Windows
        return float("nan")
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _tail(path: Path, n: int = 6) -> str:
    try:
        return " | ".join(path.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-n:])
    except OSError:
        return "(no log)"


def run_all(args: argparse.Namespace) -> int:
    """Every selected stage in turn, the JSON after each, the Markdown table at the end; 0 when all passed."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / "device_check.json"
    form = "quick" if args.quick else "full"
    limits = {k: round(v * args.limit_scale, 1) for k, v in LIMITS[form].items()}
    only = [s for s in STAGES if s in args.only]
    doc: dict[str, Any] = {"tool": "benchmarks/device_check.py", "form": form, "device": args.device,
                           "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                           "machine": machine_info(), "packages": package_versions(), "limits_s": limits,
                           "stages": {}}
    if args.only != list(STAGES) and json_path.is_file():    # a partial rerun keeps the other stages' records
        try:
            doc["stages"] = json.loads(json_path.read_text(encoding="utf-8")).get("stages", {})
        except ValueError:
            pass
    write_json_atomic(json_path, doc)
    t0 = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="device_check-"))
    spare = 0.0      # time earlier stages left unused goes to the next: the total stays within the sum of limits
    for name in only:
        limit = round(limits[name] + spare, 1)
        print(f"[device_check] {name}: limit {limit} s ...", flush=True)
        rec = run_stage(name, args, limit, json_path, work)
        rec["own_limit_s"] = limits[name]
        spare = max(0.0, limit - rec["seconds"])
        doc["stages"][name] = rec
        doc["torch"] = doc.get("torch") or rec.get("env")
        doc["wall_s"] = round(time.monotonic() - t0, 1)
        write_json_atomic(json_path, doc)
        print(f"[device_check] {name}: {rec['status']} in {rec['seconds']} s (CPU {rec['cpu_s']} s)", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    doc["finished"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    write_json_atomic(json_path, doc)
    table = markdown(doc)
    (out / "device_check.md").write_text(table, encoding="utf-8")
    print(table)
    return 0 if all(doc["stages"][s]["status"] == "passed" for s in only) else 1


def _cell(text: Any) -> str:
    """A Markdown table cell: pipes escaped, one line."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _fmt_ok(ok: Any) -> str:
    return {True: "pass", False: "**FAIL**", None: "-"}.get(ok, str(ok))


def markdown(doc: dict[str, Any]) -> str:
    """The report: a header (machine, GPU, driver, torch) and one table row per figure."""
    m, t = doc["machine"], doc.get("torch") or {}
    gpus = ", ".join(g["name"] for g in m.get("gpus", [])) or "none"
    lines = [f"# device_check ({doc['form']} form, device {doc['device']}, {doc['started']})", "",
             f"* machine: {m.get('host')}, {m.get('cpu')}, {m.get('cores')} cores, {m.get('memory_gib')} GiB, "
             f"load {m.get('load_average')}",
             f"* GPU: {gpus}; driver {m.get('driver') or '-'}",
             f"* torch {t.get('torch', '?')} (CUDA {t.get('cuda') or '-'}, cuDNN {t.get('cudnn') or '-'}), "
             f"Python {m.get('python')}, device {t.get('device_name', '?')}",
             f"* wall time {doc.get('wall_s', '?')} s; limits {doc['limits_s']}",
             "* packages absent: " + (", ".join(k for k, v in doc.get("packages", {}).items() if v is None) or "none")]
    if doc["form"] == "quick":
        lines.append("* quick form: tiny models and batches; its figures show that each code path runs, they are "
                     "not measurements")
    lines += ["",
              "| stage | item | figure | threshold | result |", "|---|---|---|---|---|"]
    for name, rec in doc["stages"].items():
        lines.append(f"| {name} | (stage) | {rec['seconds']} s of {rec['limit_s']} s (CPU {rec.get('cpu_s')} s) | - "
                     f"| {rec['status']} |")
        for r in rec["rows"]:
            lines.append(f"| {name} | {_cell(r['item'])} | {_cell(r['value'])} | {_cell(r.get('threshold') or '-')} | "
                         f"{_fmt_ok(r.get('ok'))} |")
    notes = [f"* {name}: {n}" for name, rec in doc["stages"].items() for n in rec.get("notes", [])]
    return "\n".join(lines + ([""] + ["Notes:"] + notes if notes else [])) + "\n"


def prepare(dest: Path, source: Path | None) -> int:
    """Copy the CIFAR-10 JPEG-75 tarball, the exact test subset and the frost textures into ``dest``."""
    src = source or Path(os.environ.get("DGSA_SHARED_DATA") or REPO.parent / "shared" / "data")
    missing = [f for f in CARRIED if not (src / f).is_file()]
    if missing:
        print(f"error: {src} lacks {', '.join(missing)}", file=sys.stderr)
        return 2
    for f in CARRIED:
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / f, dest / f)
    size = sum((dest / f).stat().st_size for f in CARRIED)
    print(f"copied {len(CARRIED)} files ({size / 2 ** 20:.1f} MiB) from {src} to {dest}; carry it with the "
          f"device call (it is git-ignored)")
    return 0


# ========================================================================================= the stages (children)
class Recorder:
    """A stage's figures: table rows (item, value, threshold, ok), raw data and notes, flushed after each."""

    def __init__(self, path: Path) -> None:
        self.path, self.rows, self.data, self.notes, self.env = path, [], {}, [], {}
        self.done = False

    def row(self, item: str, value: str, ok: bool | None = None, threshold: str = "") -> None:
        self.rows.append({"item": item, "value": value, "threshold": threshold, "ok": ok})
        print(f"  {item}: {value} {threshold} {_fmt_ok(ok)}", flush=True)
        self.flush()

    def put(self, key: str, value: Any) -> None:
        self.data[key] = value
        self.flush()

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(f"  note: {text}", flush=True)
        self.flush()

    def attempt(self, label: str, fn: Callable[[], None]) -> None:
        """Run one check; an exception becomes a failed row (the stage goes on with its next check)."""
        t0 = time.monotonic()
        try:
            fn()
        except (Exception, SystemExit) as e:  # noqa: BLE001 - any failure of a check is a finding, recorded
            # (SystemExit too: vs_timm.build_models exits when timm's parameter count differs from ours)
            traceback.print_exc()
            self.row(label, f"error: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}", False)
        finally:
            self.put("check_seconds", {**self.data.get("check_seconds", {}), label: round(time.monotonic() - t0, 2)})

    def flush(self) -> None:
        write_json_atomic(self.path, {"rows": self.rows, "data": self.data, "notes": self.notes, "env": self.env,
                                      "done": self.done})


class Ctx:
    """What a stage knows: the device, the form, the data folder, the output folder, the run's JSON."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch
        self.quick, self.out = bool(args.quick), Path(args.out)
        self.device = torch.device(args.device)
        self.cuda = self.device.type == "cuda"
        self.json_path = Path(args.json_path) if args.json_path else None
        self.data = find_data()

    def earlier(self, stage: str) -> dict[str, Any]:
        """Another stage's data from this run's JSON (empty when it did not run)."""
        try:
            return json.loads(self.json_path.read_text())["stages"][stage]["data"]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {}


def find_data() -> Path | None:
    """The folder holding cifar10/ and corruptions/frost/: .devdata/ (carried), $DGSA_SHARED_DATA, ../shared/data."""
    places = [DEVDATA, Path(os.environ.get("DGSA_SHARED_DATA", "") or DEVDATA), REPO.parent / "shared" / "data"]
    for p in places:
        if (p / "cifar10" / "cifar10-jpeg75.tar.xz").is_file() or (p / "corruptions" / "frost").is_dir():
            return p
    return None


def torch_env(device) -> dict[str, Any]:
    import torch
    env = {"torch": torch.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
           "device": str(device), "gpu_count": torch.cuda.device_count() if torch.cuda.is_available() else 0}
    env["device_name"] = (torch.cuda.get_device_name(device) if device.type == "cuda"
                          else f"CPU, {torch.get_num_threads()} thread(s)")
    return env


def run_child(args: argparse.Namespace) -> int:
    rec = Recorder(Path(args.result))
    import torch
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        rec.row("device", f"{args.device} requested but CUDA is not available", False)
        return 1
    ctx = Ctx(args)
    rec.env = torch_env(ctx.device)
    rec.flush()
    import device_check_stages as stages
    getattr(stages, f"stage_{args.stage}")(rec, ctx)
    rec.done = True
    rec.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)       # no interpreter teardown (torch's threads, process groups): the figures are written


# ================================================================================================ command line
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--device", default=None,
                    help="cuda, cuda:N or cpu (default: cuda where an NVIDIA driver is installed)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes: every stage's code path (the CPU smoke form)")
    ap.add_argument("--only", default=",".join(STAGES), help=f"comma list of stages (default: all: {','.join(STAGES)})")
    ap.add_argument("--out", default=None, help="output folder (default: $OUT when set, else ./device_check)")
    ap.add_argument("--limit-scale", type=float, default=1.0,
                    help="multiply every stage's time limit (e.g. 2 on a loaded machine; default 1)")
    ap.add_argument("--prepare", action="store_true", help="copy the carried data (CIFAR-10 JPEG-75 tarball, exact "
                    "test subset, frost textures) from --from into .devdata/ and exit")
    ap.add_argument("--from", dest="source", default=None, help="data folder for --prepare (default ../shared/data)")
    ap.add_argument("--stage", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--result", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--json-path", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--ddp-worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.only = [s.strip() for s in args.only.split(",") if s.strip()]
    bad = [s for s in args.only if s not in STAGES]
    if bad:
        ap.error(f"--only: unknown stage {bad[0]!r} (valid: {', '.join(STAGES)})")
    if not args.limit_scale > 0:
        ap.error("--limit-scale must be > 0")
    if args.device is None:
        args.device = "cuda" if shutil.which("nvidia-smi") or Path("/proc/driver/nvidia").exists() else "cpu"
    if args.device != "cpu" and not args.device.startswith("cuda"):
        ap.error(f"--device must be cpu, cuda or cuda:N, got {args.device!r}")
    args.out = str(Path(args.out) if args.out else default_out())
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.prepare:
        return prepare(DEVDATA, Path(args.source) if args.source else None)
    if args.ddp_worker:
        import device_check_stages as stages
        return stages.ddp_worker(Path(args.ddp_worker), args.device)
    if args.stage:
        return run_child(args)
    return run_all(args)


if __name__ == "__main__":
    sys.exit(main())
