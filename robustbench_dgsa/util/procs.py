"""Child processes that do not outlive their parent: a pool worker or job process left behind by a killed
(kill -9) command would go on computing and writing into the run's folders."""
from __future__ import annotations

import atexit
import gc
import os
import signal
import sys
import threading
import time

#: how often the fallback thread looks for its parent (seconds)
CHECK_EVERY_S = 0.5


def die_with_parent(parent: int) -> None:
    """End this process when ``parent`` (the pid that started it) ends, however it ends.

    On Linux the kernel sends SIGKILL when the parent dies (``prctl(PR_SET_PDEATHSIG)``); everywhere a daemon
    thread also checks ``os.getppid()`` every :data:`CHECK_EVERY_S` seconds and exits on a change (the parent is
    gone and the process was re-parented). A parent already gone before this call ends the process at once."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass  # no prctl: the thread below still ends this process
    if os.getppid() != parent:  # the parent died before the death signal was armed
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(CHECK_EVERY_S)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="die-with-parent", daemon=True).start()


_FREEZE_AT_EXIT: list[bool] = []


def skip_collection_at_exit() -> None:
    """At interpreter exit (an ``atexit`` handler) freeze every object (``gc.freeze``) so that the shutdown's
    garbage collections skip them: a process that loaded torch, pandas and matplotlib then exits in
    ~0.2 s instead of ~1 s (a pool's parent waits for its workers to exit). Only objects in reference cycles are
    then left uncollected, and the process is ending; every file the suite writes is closed in a ``with`` block.
    Registered once per process, however often it is called."""
    if not _FREEZE_AT_EXIT:
        _FREEZE_AT_EXIT.append(True)
        atexit.register(gc.freeze)


def worker_init(parent: int, then: str = "") -> None:
    """A pool's initializer: :func:`die_with_parent` first (this module is light, so it is armed before any heavy
    import), :func:`skip_collection_at_exit`, then ``then`` (``"package.module:function"``, called without
    arguments) when given."""
    die_with_parent(parent)
    skip_collection_at_exit()
    if then:
        import importlib
        module, _, name = then.partition(":")
        getattr(importlib.import_module(module), name)()
