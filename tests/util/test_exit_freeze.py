"""util.procs.skip_collection_at_exit: registered once however often it is called, it freezes every object at
exit, not before (so the shutdown's collections skip them), and leaves the exit status alone."""
from __future__ import annotations

import subprocess
import sys
import textwrap


def test_objects_are_frozen_at_exit_once_and_the_status_is_kept():
    code = textwrap.dedent("""
        import atexit, gc, os, sys
        atexit.register(lambda: os.write(1, f"frozen={gc.get_freeze_count() > 0}\\n".encode()))  # runs after it
        from robustbench_dgsa.util import procs
        calls = []
        real = atexit.register
        atexit.register = lambda fn, *a: calls.append(fn) or real(fn, *a)
        procs.skip_collection_at_exit()
        procs.skip_collection_at_exit()
        atexit.register = real
        print(f"registered={len(calls)}", flush=True)
        print(f"frozen_now={gc.get_freeze_count() > 0}", flush=True)
        sys.exit(3)
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 3, run.stderr
    assert run.stdout.split() == ["registered=1", "frozen_now=False", "frozen=True"]
