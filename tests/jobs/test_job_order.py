"""reproduce's job order (``_train_all``): text jobs run beside the corruption of the image test set; once it
exists every image job goes before the text jobs left, which fill the end; at most ``n_workers`` tasks at once."""
from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace

import pytest

from robustbench_dgsa.jobs import reproduce as rp


class _Pool:
    """Runs nothing: records what was submitted and in flight; the corruption task ends when the job whose
    position is ``corrupt_ends_at`` is submitted, every job task when the next submission or wait comes."""

    def __init__(self, corrupt: Future, corrupt_ends_at: int) -> None:
        self.corrupt, self.ends_at = corrupt, corrupt_ends_at
        self.order: list[str] = []
        self.open: list[Future] = [corrupt]
        self.most_open = 1

    def submit(self, fn, plan, job, one, dirs, rollout):
        self.order.append(job.id)
        if len(self.order) == self.ends_at:
            self.corrupt.set_result(("dir", 1.5))
        f: Future = Future()
        self.open = [o for o in self.open if not o.done()] + [f]
        self.most_open = max(self.most_open, len(self.open))
        f.set_result((0, 0.0))
        return f

    def result(self, f: Future):
        return f.result()


def _jobs(dataset: str, n: int) -> list:
    return [SimpleNamespace(id=f"{dataset}-{i}", dataset=dataset) for i in range(n)]


@pytest.mark.parametrize("ends_at", [1, 3])
def test_image_jobs_go_first_once_their_corruptions_exist(ends_at):
    text, image = _jobs("synthetic-text", 5), _jobs("synthetic-vision", 4)
    corrupt: Future = Future()
    pool = _Pool(corrupt, ends_at)
    phases = []
    results = rp._train_all(pool, 2, SimpleNamespace(), text + image, {"synthetic-vision": corrupt}, set(), False,
                            lambda name, t0, seconds=None: phases.append((name, seconds)))
    started = ends_at                                     # text jobs submitted while the corruption ran
    assert pool.order == ([j.id for j in text[:started]] + [j.id for j in image]
                          + [j.id for j in text[started:]])
    assert len(results) == 9 and phases == [("corrupt", 1.5)]
    assert pool.most_open <= 2


def test_without_corruptions_jobs_keep_their_order():
    jobs = _jobs("synthetic-text", 2) + _jobs("synthetic-vision", 2)
    pool = _Pool(Future(), 0)
    phases = []
    rp._train_all(pool, 2, SimpleNamespace(), jobs, {}, set(), False,
                  lambda name, t0, seconds=None: phases.append((name, seconds)))
    assert pool.order == [j.id for j in jobs] and phases == [("corrupt", 0.0)]


def test_when_idle_runs_once_while_the_last_job_still_runs():
    """``when_idle`` (the main process's warm-up) is called once, when a worker has nothing left to do and another
    job still runs — not before the last job was handed out, not after everything ended."""
    import threading

    jobs = _jobs("synthetic-text", 3)
    slow: Future = Future()

    class Pool(_Pool):
        def submit(self, fn, plan, job, one, dirs, rollout):
            self.order.append(job.id)
            if job.id.endswith("-1"):
                threading.Timer(0.3, slow.set_result, args=((0, 0.0),)).start()
                return slow
            f: Future = Future()
            f.set_result((0, 0.0))
            return f

    pool = Pool(Future(), 0)
    seen = []
    rp._train_all(pool, 2, SimpleNamespace(), jobs, {}, set(), False, lambda *a, **k: None,
                  when_idle=lambda: seen.append((list(pool.order), slow.done())))
    assert seen == [([j.id for j in jobs], False)]
