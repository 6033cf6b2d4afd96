"""Child processes that do not outlive their parent: a pool worker or job process left behind by a killed
(kill -9) command would go on computing and writing into the run's folders."""
from __future__ import annotations

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


def worker_init(parent: int, then: str = "") -> None:
    """A pool's initializer: :func:`die_with_parent` first (this module is light, so it is armed before any heavy
    import), then ``then`` (``"package.module:function"``, called without arguments) when given."""
    die_with_parent(parent)
    if then:
        import importlib
        module, _, name = then.partition(":")
        getattr(importlib.import_module(module), name)()
