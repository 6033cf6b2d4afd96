"""util.figures.saving_in_background: figures written by forked child processes are byte-identical to figures
written in place (several formats of one figure in one child, in order), a child's failure is raised when the
block ends (errno kept; no file left), and where forking is not used the figures are written in place."""
from __future__ import annotations

import errno
import os
import threading

import matplotlib
import numpy as np
import pytest

import robustbench_dgsa.util.figures as figures
from robustbench_dgsa.util.figures import save_as, save_figure, saving_in_background

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

needs_fork = pytest.mark.skipif(not figures.background_saves_possible(),
                                reason="background saves need Linux and more than one CPU")


def _figure(i: int):
    fig, ax = plt.subplots(figsize=(2.4, 1.8), layout="constrained")   # a layout engine moves on every draw
    ax.plot(np.arange(10), np.sin(np.arange(10) + i), marker="o", label=f"line {i}")
    ax.set_title(f"figure {i}")
    ax.legend()
    return fig


def _write_all(folder, background: bool) -> list:
    paths = []
    with (saving_in_background() if background else _nothing()):
        for i in range(3):
            fig = _figure(i)
            paths += save_figure(fig, folder, f"f{i}")
            paths.append(save_as(fig, folder / f"g{i}.png", folder / f"g{i}.pdf"))
            paths.append(folder / f"g{i}.pdf")
            plt.close(fig)
    return paths


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


@needs_fork
def test_background_saves_give_the_bytes_of_saves_in_place(tmp_path, monkeypatch):
    forks = []
    real_fork = os.fork
    monkeypatch.setattr(os, "fork", lambda: forks.append(1) or real_fork())
    monkeypatch.setattr(threading, "active_count", lambda: 1)   # the test runner may run threads of its own
    (tmp_path / "here").mkdir()
    (tmp_path / "child").mkdir()
    here = _write_all(tmp_path / "here", background=False)
    assert not forks
    child = _write_all(tmp_path / "child", background=True)
    assert len(forks) == 6                                   # one child per figure and call, all formats in it
    assert [p.name for p in here] == [p.name for p in child]
    for a, b in zip(here, child):
        assert a.read_bytes() == b.read_bytes(), a.name
    assert sorted(p.name for p in (tmp_path / "child").iterdir()) == sorted(p.name for p in child)   # no temps


@needs_fork
def test_a_childs_failure_is_raised_when_the_block_ends_with_its_errno(tmp_path, monkeypatch):
    monkeypatch.setattr(threading, "active_count", lambda: 1)

    def full_disk(fig, paths):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(figures, "_write_files", full_disk)    # the forked child inherits it
    fig = _figure(0)
    with pytest.raises(OSError) as info:
        with saving_in_background():
            save_figure(fig, tmp_path, "f")                  # returns at once: the child fails later
    plt.close(fig)
    assert info.value.errno == errno.ENOSPC and "f.png" in str(info.value)
    assert list(tmp_path.iterdir()) == []


@needs_fork
def test_an_error_in_the_block_wins_and_the_children_are_waited_for(tmp_path, monkeypatch):
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    fig = _figure(1)
    with pytest.raises(KeyError):
        with saving_in_background():
            save_figure(fig, tmp_path, "f")
            raise KeyError("the caller's own error")
    plt.close(fig)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.pdf", "f.png"]   # the child finished its files


def test_with_other_threads_running_figures_are_written_in_place(tmp_path, monkeypatch):
    forks = []
    real_fork = os.fork
    monkeypatch.setattr(os, "fork", lambda: forks.append(1) or real_fork())
    monkeypatch.setattr(threading, "active_count", lambda: 2)
    fig = _figure(2)
    with saving_in_background():
        paths = save_figure(fig, tmp_path, "f")
        assert all(p.is_file() for p in paths)                # written before save_figure returned
    plt.close(fig)
    assert not forks


def test_a_bad_format_is_refused_before_anything_is_written(tmp_path):
    fig = _figure(3)
    with pytest.raises(figures.UserError, match="must be .png, .pdf or .svg"):
        save_as(fig, tmp_path / "a.png", tmp_path / "b.gif")
    plt.close(fig)
    assert list(tmp_path.iterdir()) == []
