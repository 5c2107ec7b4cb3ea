"""Ctrl-C on `make demo`, the README's main job: it stops at once, the local stack with it,
with one line and exit 130, never a chain of tracebacks from threads still calling a server
that the same Ctrl-C had already stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from vhs_ops.local import owner
from vhs_testing.signals import restore_ctrl_c

# A clean stop takes about a second here; main took 30 s (the pipeline's threads retrying
# a server that the same Ctrl-C had stopped) before dying on a traceback.
STOPS_WITHIN = 10.0


def test_ctrl_c_on_the_demo_stops_it_at_once_with_one_line(tmp_path: Path):
    demo = subprocess.Popen(
        [sys.executable, "-m", "vhs_ops.local.demo"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a process group of its own, as a terminal's job is
        preexec_fn=restore_ctrl_c,  # and Ctrl-C's default action, as a terminal's job has
    )
    assert demo.stdout is not None
    endpoint = None
    for line in demo.stdout:  # blocks until the demo prints; no sleeping
        if line.startswith("local stack at "):
            endpoint = line.split()[3].rstrip(":")
        if line.startswith("wave 1:"):
            break
    interrupted = time.monotonic()
    os.killpg(demo.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends: the whole group
    _, err = demo.communicate(timeout=60)
    took = time.monotonic() - interrupted
    assert demo.returncode == 130, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("stopped: interrupted (Ctrl-C or SIGTERM)")
    assert took < STOPS_WITHIN, f"{took:.1f}s"
    assert endpoint is not None
    assert not owner.listening(int(endpoint.rpartition(":")[2]))
