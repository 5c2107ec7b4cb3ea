"""`vhs local up --detach` and `vhs local down`: the local stack in the background, so that
`eval "$(vhs local up --detach)"` loads its environment and returns.

`vhs local up` serves until it is stopped, so a shell cannot take its export lines with
`$(...)`: that waits for the output to end. `--detach` runs the same stack in a process of its
own session (a terminal's Ctrl-C does not reach it), waits for it to be ready, prints its
environment and exits. The stack notes its process and environment in STATE, in the
directory it was started from, and removes the note when it stops; a second `--detach` there
with the same options prints the running stack's environment instead of starting another, so
it also loads the environment into a new shell (with other options it refuses: two stacks
cannot share the port). `vhs local down` stops it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .pipeline import print_env

# Relative to the directory the stack was started from, beside its other files (.vhs/).
STATE = Path(".vhs/local-up.json")
LOG = Path(".vhs/logs/local-up.log")
# How long `vhs local down` waits for the stack to finish the batch in hand and stop.
STOP_SECONDS = 30.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A stopped process whose parent has not reaped it yet is gone for our purposes.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] != "Z"


def running() -> dict[str, Any] | None:
    """The note of the stack running from this directory ({"pid", "env", "log"}), or None."""
    try:
        note = json.loads(STATE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return note if isinstance(note, dict) and _alive(int(note.get("pid", 0))) else None


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """The options a stack was started with, as they decide what it serves (not how this
    command prints)."""
    return {
        name: value
        for name, value in sorted(vars(args).items())
        if name not in ("json", "detach") and isinstance(value, str | int | float | type(None))
    }


def detach(args: argparse.Namespace, serve: Callable[..., int]) -> int:
    """Start `serve(args)` in the background and print its environment once it is ready (or
    the environment of the stack already running from this directory)."""
    note = running()
    if note is not None:
        if note.get("options") != _options(args):
            print(
                f"error: a local stack with other options is running here (pid {note['pid']}): "
                "stop it first with vhs local down",
                file=sys.stderr,
            )
            return 2
        print(
            f"a local stack is already running here (pid {note['pid']}; its log: {note['log']}); "
            "its environment follows",
            file=sys.stderr,
        )
        print_env(note["env"], as_json=args.json)
        return 0
    LOG.parent.mkdir(parents=True, exist_ok=True)
    STATE.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the stack's process: it never returns
        os.close(read_end)
        _serve_detached(args, serve, write_end)
    os.close(write_end)
    with os.fdopen(read_end, encoding="utf-8") as lines:
        ready = any(line.strip() == "ready" for line in lines)
    note = running() if ready else None
    if note is None:
        os.waitpid(pid, 0)
        logged = LOG.read_text(encoding="utf-8", errors="replace").splitlines()
        errors = [line.removeprefix("error: ") for line in logged if line.startswith("error: ")]
        print(
            f"error: the local stack did not start ({errors[-1] if errors else 'see its log'}; "
            f"its log: {LOG})",
            file=sys.stderr,
        )
        return 1
    print_env(note["env"], as_json=args.json)
    print(
        f"local stack running in the background (pid {pid}; its log: {LOG}); "
        "vhs local down stops it",
        file=sys.stderr,
    )
    return 0


def _serve_detached(args: argparse.Namespace, serve: Callable[..., int], pipe: int) -> None:
    """In the forked process: a session of its own, standard input from /dev/null, standard
    output to the pipe until "ready" and to the log after it (so that nothing the stack
    prints later can fail on a reader that has gone), standard error to the log."""
    status = 1
    try:
        os.setsid()
        log = os.open(LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(pipe, 1)
        os.dup2(log, 2)
        os.close(pipe)

        def ready(env: dict[str, str]) -> None:
            note = {"pid": os.getpid(), "env": env, "log": str(LOG), "options": _options(args)}
            STATE.write_text(json.dumps(note, indent=2), encoding="utf-8")
            print("ready", flush=True)
            os.dup2(log, 1)

        status = serve(argparse.Namespace(**{**vars(args), "json": False}), ready)
    except BaseException as error:  # the log is the only place left to say so
        text = " ".join(str(error).split())
        print(f"error: {type(error).__name__}: {text}", file=sys.stderr, flush=True)
    finally:
        mine = running()
        if mine is not None and mine["pid"] == os.getpid():
            STATE.unlink()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def cmd_local_down(args: argparse.Namespace) -> int:
    """Stop the stack `vhs local up --detach` started from this directory, and wait until it
    has (it finishes the batch in hand first)."""
    note = running()
    if note is None:
        if args.json:
            print(json.dumps({"stopped": None}))
        else:
            print("no local stack is running from this directory", file=sys.stderr)
        return 0
    pid = int(note["pid"])
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_SECONDS
    while _alive(pid):
        if time.monotonic() > deadline:
            print(
                f"error: the local stack (pid {pid}) did not stop in {STOP_SECONDS:g}s",
                file=sys.stderr,
            )
            return 1
        time.sleep(0.1)
    if args.json:
        print(json.dumps({"stopped": pid}))
    else:
        print(f"stopped the local stack (pid {pid}); what it held is gone", file=sys.stderr)
    return 0
