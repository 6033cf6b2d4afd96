"""engine.predict.forward_batches on the CPU: each batch is yielded once, in order, as calls of at most the call
size; and cpu_forward_workers: in bf16 on the CPU with n >= 2 threads a batch's forward calls run in n
one-thread workers. The yields stay the inputs' batches in order, each call computes what it computes alone at
one thread (so the values do not depend on which worker ran it), the caller's thread count survives, and models
that do not declare ``concurrent_forward``, fp32, compiled or customised calls and other devices keep the
one-after-another path."""
from __future__ import annotations

import threading

import pytest
import torch

from robustbench_dgsa.engine import predict
from robustbench_dgsa.models import create_model, get_model_config
from robustbench_dgsa.util.errors import UserError


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


class _Rows(torch.nn.Module):
    """Returns its inputs' first column; records, per call, the batch size, the thread and its intra-op count."""

    def __init__(self, concurrent: bool) -> None:
        super().__init__()
        self.concurrent_forward = concurrent
        self.calls: list[tuple[int, str, int]] = []
        self.lock = threading.Lock()

    def forward(self, x, key_padding_mask=None, **kw):
        assert key_padding_mask is None or key_padding_mask.shape[0] == x.shape[0]
        with self.lock:
            self.calls.append((len(x), threading.current_thread().name, torch.get_num_threads()))
        return x[:, :1].clone()


def _tiny(name: str) -> torch.nn.Module:
    cfg = get_model_config(name)
    cfg.dim, cfg.depth, cfg.heads, cfg.num_classes = 32, 2, 2, 10
    if cfg.modality == "image":
        cfg.image_size, cfg.patch_size = 16, 4
    else:
        cfg.vocab_size, cfg.max_len = 50, 24
    torch.manual_seed(0)
    return create_model(cfg).eval()


def _check_batches(model: _Rows, column: torch.Tensor, n: int, bs: int, amp: str) -> None:
    """``forward_batches`` over the first ``n`` rows of ``column`` (with a mask when ``n`` is odd), the model's
    calls recorded afresh: each yield is exactly the next ``bs`` inputs (the last one the remainder), and together
    the yields are the inputs in order."""
    model.calls.clear()
    mask = torch.zeros(n, 2, dtype=torch.bool) if n % 2 else None
    outs = list(predict.forward_batches(model, column[:n], mask, batch_size=bs, device="cpu", amp=amp, trim=False))
    assert [len(o) for o in outs] == [min(bs, n - s) for s in range(0, n, bs)], (bs, n)
    assert torch.equal(torch.cat(outs)[:, 0], column[:n, 0]), (bs, n)


def test_forward_batches_yields_each_batch_once_for_every_batch_size(monkeypatch):
    """Issue 35: the CPU chunking inside one batch must stop at the batch's end. Every batch size 1..300, input
    lengths around the chunk and the batch boundaries, with and without a mask: each yield is exactly the next
    ``batch_size`` inputs (the last one the remainder), no call sees more than the chunk, and together the
    yields are the inputs in order. (Before the fix a batch of 100 over 612 CPU inputs yielded 128 rows.)"""
    chunk = 7
    monkeypatch.setattr(predict, "CPU_FORWARD_BATCH", chunk)
    model = _Rows(concurrent=False)
    column = torch.arange(2 * 300 + 2, dtype=torch.float32)[:, None].repeat(1, 2)
    for bs in range(1, 301):
        lengths = {1, chunk - 1, chunk, chunk + 1, 2 * chunk + 1, bs - 1, bs, bs + 1, 2 * bs - 1, 2 * bs + 1}
        for n in sorted(n for n in lengths if n >= 1):
            _check_batches(model, column, n, bs, "off")
            sizes = [c[0] for c in model.calls]
            assert max(sizes) <= min(bs, chunk) and sum(sizes) == n, (bs, n)


def test_concurrent_yields_are_the_batches_in_order_on_one_thread_workers(two_threads, monkeypatch):
    chunk = 5
    monkeypatch.setattr(predict, "CPU_FORWARD_BATCH", chunk)
    model = _Rows(concurrent=True)
    column = torch.arange(200, dtype=torch.float32)[:, None].repeat(1, 2)
    for bs in (1, 4, 5, 9, 10, 11, 23, 64):
        for n in (1, 6, 49, 50, 51, 137):
            _check_batches(model, column, n, bs, "bf16")
            assert sum(c[0] for c in model.calls) == n and max(c[0] for c in model.calls) <= chunk
            for size, thread, threads in model.calls:
                # a batch of >= 2 calls ran in the workers, at one thread each; a one-call batch on the caller
                in_worker = thread.startswith("dgsa-forward")
                assert threads == (1 if in_worker else 2), (bs, n, thread, threads)
            if bs >= 2 * chunk and n >= 2 * chunk:
                assert any(t.startswith("dgsa-forward") for _, t, _ in model.calls), (bs, n)
    assert torch.get_num_threads() == 2
    seen: list[int] = []
    t = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
    t.start()
    t.join()
    assert seen == [2]      # the process-wide count the workers lowered is restored for new threads


@pytest.mark.parametrize("why", ["not declared", "forward keywords", "compiled call", "fp32"])
def test_serial_path_where_concurrency_is_not_known_safe(two_threads, monkeypatch, why):
    monkeypatch.setattr(predict, "CPU_FORWARD_BATCH", 4)
    model = _Rows(concurrent=why != "not declared")
    x = torch.arange(40, dtype=torch.float32)[:, None].repeat(1, 2)
    kw = {"return_attention": False} if why == "forward keywords" else {}
    forward = model.forward if why == "compiled call" else None
    amp = "off" if why == "fp32" else "bf16"
    out = torch.cat(list(predict.forward_batches(model, x, batch_size=16, device="cpu", amp=amp, trim=False,
                                                 forward=forward, **kw)))
    assert torch.equal(out[:, 0], x[:, 0])
    assert {t for _, t, _ in model.calls} == {threading.current_thread().name}
    assert {n for _, _, n in model.calls} == {2}


def test_worker_count_rule():
    model = _Rows(concurrent=True)
    cpu = torch.device("cpu")
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert predict.cpu_forward_workers(model, cpu, 4, "bf16") == 2
        assert predict.cpu_forward_workers(model, cpu, 2, "bf16") == 2
        assert predict.cpu_forward_workers(model, cpu, 1, "bf16") == 1
        assert predict.cpu_forward_workers(model, cpu, 4, "off") == 1
        auto = predict.resolve_precision(cpu, "auto") == "bf16"
        assert predict.cpu_forward_workers(model, cpu, 4, "auto") == (2 if auto else 1)
        assert predict.cpu_forward_workers(model, cpu, 4, "bf16", custom_call=True) == 1
        assert predict.cpu_forward_workers(model, torch.device("meta"), 4, "bf16") == 1
        assert predict.cpu_forward_workers(_Rows(concurrent=False), cpu, 4, "bf16") == 1
        torch.set_num_threads(3)
        assert predict.cpu_forward_workers(model, cpu, 2, "bf16") == 1   # fewer calls than threads: one on all 3
        assert predict.cpu_forward_workers(model, cpu, 4, "bf16") == 3
        torch.set_num_threads(1)
        assert predict.cpu_forward_workers(model, cpu, 4, "bf16") == 1
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("name", ["dgvit", "dvit", "vit", "dgt"])
def test_suite_models_give_each_call_what_it_gives_alone_at_one_thread(two_threads, name, monkeypatch):
    """The workers' outputs equal, bit for bit, the same 64-example calls made one by one on this thread at one
    intra-op thread (the same kernels on the same data: only where they run differs), and two runs agree."""
    model = _tiny(name)
    assert model.concurrent_forward
    monkeypatch.setattr(predict, "CPU_CALL_ELEMENTS", 64 * model.activations_per_example)
    assert predict.cpu_call_examples(model) == 64                # several calls per batch of 256
    g = torch.Generator().manual_seed(1)
    if get_model_config(name).modality == "image":
        x, mask = torch.randn(200, 3, 16, 16, generator=g), None
    else:
        x = torch.randint(1, 50, (200, 24), generator=g)
        mask = torch.zeros(200, 24, dtype=torch.bool)
        mask[::3, 17:] = True
        x[mask] = 0
    amp = "bf16"
    assert predict.cpu_forward_workers(model, torch.device("cpu"), 4, amp) == 2
    runs = [torch.cat(list(predict.forward_batches(model, x, mask, batch_size=256, device="cpu", amp=amp,
                                                   trim=False))) for _ in range(2)]
    assert torch.equal(runs[0], runs[1])
    torch.set_num_threads(1)
    alone = []
    with torch.no_grad(), predict.autocast(torch.device("cpu"), amp):
        for s in range(0, len(x), 64):
            sl = slice(s, s + 64)
            alone.append(model(x[sl]) if mask is None else model(x[sl], key_padding_mask=mask[sl]))
    assert torch.equal(runs[0], torch.cat(alone))


def test_examples_per_cpu_call_follow_the_activation_size(monkeypatch):
    """A model that declares ``activations_per_example`` (the suite's do: tokens × width) gets
    CPU_CALL_ELEMENTS ÷ that many examples per CPU call, within CPU_CALL_RANGE; the zoo's image models the 64
    that CPU_FORWARD_BATCH was measured at; a model that declares nothing gets CPU_FORWARD_BATCH."""
    vit = create_model("vit", dim=96, depth=1, heads=4, num_classes=10, image_size=32)
    assert vit.activations_per_example == 65 * 96 and predict.cpu_call_examples(vit) == 64
    imdb = create_model("transformer", dim=96, depth=1, heads=4, num_classes=2, vocab_size=100, max_len=256)
    assert predict.cpu_call_examples(imdb) == 16                  # 257 tokens
    tiny = create_model("dgvit", dim=32, depth=1, heads=2, num_classes=6, image_size=32)
    assert predict.cpu_call_examples(tiny) == 192
    assert predict.cpu_call_examples(_Rows(concurrent=False)) == predict.CPU_FORWARD_BATCH
    brought = _Rows(concurrent=False)
    brought.activations_per_example = predict.CPU_CALL_ELEMENTS // 10
    assert predict.cpu_call_examples(brought) == 16                # 10, raised to the range's floor
    for bad in (0, -5, 2.5, "many", True):
        brought.activations_per_example = bad
        with pytest.raises(UserError, match="activations_per_example must be a positive whole number"):
            predict.cpu_call_examples(brought)
    brought.activations_per_example = predict.CPU_CALL_ELEMENTS // 100
    x = torch.arange(250, dtype=torch.float32)[:, None].repeat(1, 2)
    out = torch.cat(list(predict.forward_batches(brought, x, batch_size=512, device="cpu", amp="off", trim=False)))
    assert [c[0] for c in brought.calls] == [84, 83, 83] and torch.equal(out[:, 0], x[:, 0])  # even, not 100+100+50
    brought.calls.clear()
    out = torch.cat(list(predict.forward_batches(brought, x, batch_size=128, device="cpu", amp="off", trim=False)))
    assert [c[0] for c in brought.calls] == [64, 64, 61, 61] and torch.equal(out[:, 0], x[:, 0])


def _forward_in_child(q) -> None:
    model = _Rows(concurrent=True)
    x = torch.arange(40, dtype=torch.float32)[:, None].repeat(1, 2)
    out = torch.cat(list(predict.forward_batches(model, x, batch_size=16, device="cpu", amp="bf16", trim=False)))
    q.put((bool(torch.equal(out[:, 0], x[:, 0])), any(t.startswith("dgsa-forward") for _, t, _ in model.calls)))


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_a_forked_child_gets_its_own_workers(two_threads, monkeypatch):
    """A child forked after the parent's workers ran has none of their threads: it must start its own pool
    (the parent's would queue the calls forever)."""
    import multiprocessing
    monkeypatch.setattr(predict, "CPU_FORWARD_BATCH", 4)
    model = _Rows(concurrent=True)
    list(predict.forward_batches(model, torch.zeros(16, 2), batch_size=16, device="cpu", amp="bf16", trim=False))
    assert predict._POOLS
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    child = ctx.Process(target=_forward_in_child, args=(q,))
    child.start()
    child.join(60)
    if child.is_alive():
        child.kill()
        pytest.fail("the forked child's concurrent forward hung")
    assert child.exitcode == 0 and q.get(timeout=5) == (True, True)
