"""`vhs local up --detach`, `vhs local down` and `vhs local status`: the local stack in the
background, so that `eval "$(vhs local up --detach)"` loads its environment and returns.

`vhs local up` serves until it is stopped, so a shell cannot take its export lines with
`$(...)`: that waits for the output to end. `--detach` runs the same stack in a process of its
own session (a terminal's Ctrl-C does not reach it), waits for it to be ready, prints its
environment and exits. A second `--detach` there with the same options prints the running
stack's environment instead of starting another, so it also loads the environment into a new
shell (with other options it refuses: stop that one first).

What a directory's stack is, is certain, not a guess from a pid:

* LOCK is held (flock) by the detached stack's process for as long as it runs, and by no one
  else: the kernel drops it when that process ends, however it ends. No stack runs from a
  directory whose lock is free, whatever its note says.
* STATE, the note, names the process by its pid, its start time and its command line
  (owner.ProcessIdentity). `down` signals the pid only while the lock is held and that
  process is still the one the note names: a pid handed on to another process, or a note
  with no pid (or 0, or -1, which kill(2) reads as process groups), signals nothing.
* STARTING is held by `up --detach` while it starts a stack: a second one at the same time
  waits for it, then finds the first stack running and prints its environment.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..local.owner import port_holder, process_identity, valid_pid
from .output import emit_json, print_env

# Relative to the directory the stack was started from, beside its other files (.vhs/).
STATE = Path(".vhs/local-up.json")
LOCK = Path(".vhs/local-up.lock")
STARTING = Path(".vhs/local-up.starting.lock")
LOG = Path(".vhs/logs/local-up.log")
# How long `vhs local down` waits for the stack to finish the batch in hand and stop.
STOP_SECONDS = 30.0


def _lock(path: Path) -> int | None:
    """An open descriptor holding `path`'s exclusive lock, or None when another holds it."""
    fd = _open_lock_file(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _wait_for_lock(path: Path) -> int:
    """An open descriptor holding `path`'s exclusive lock, once whoever holds it lets go."""
    fd = _open_lock_file(path)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def _open_lock_file(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)


def _held(path: Path) -> bool:
    """Whether a process holds `path`'s lock (this one's own descriptors count as others)."""
    if not path.exists():
        return False
    fd = _lock(path)
    if fd is None:
        return True
    os.close(fd)
    return False


@dataclass(frozen=True)
class Found:
    """What runs from this directory: `note` when a stack runs and is proved to be the one its
    note names; otherwise `problem` says what was found instead (None: nothing at all)."""

    note: dict[str, Any] | None = None
    problem: str | None = None
    stale: dict[str, Any] | None = None  # the note of a stack that is gone, now removed


def _read_note() -> dict[str, Any] | None:
    try:
        note = json.loads(STATE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return note if isinstance(note, dict) else None


def _proof_fails(note: dict[str, Any] | None) -> str | None:
    """Why `note` does not name a running process that is the one it names, or None."""
    if note is None:
        return f"{STATE} is missing or not JSON"
    pid = valid_pid(note.get("pid"))
    if pid is None:
        return f"{STATE} names no single process (pid {note.get('pid')!r})"
    identity = process_identity(pid)
    if identity is None:
        return f"process {pid}, which {STATE} names, has gone"
    if identity.as_dict() != note.get("process"):
        return f"process {pid} is not the one {STATE} names (another start time or command)"
    return None


def find() -> Found:
    """The stack running from this directory, proved; a stale note is removed on the way."""
    note = _read_note()
    if not _held(LOCK):
        if STATE.exists():
            STATE.unlink(missing_ok=True)  # its stack has gone: the lock went with it
            return Found(stale=note or {})
        return Found()
    problem = _proof_fails(note)
    if problem is not None:
        return Found(problem=f"a process holds {LOCK}, but {problem}")
    return Found(note=note)


def running() -> dict[str, Any] | None:
    """The note of the stack running from this directory, proved, or None."""
    return find().note


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """The options a stack was started with, as they decide what it serves (not how this
    command prints)."""
    return {
        name: value
        for name, value in sorted(vars(args).items())
        if name not in ("json", "detach") and isinstance(value, str | int | float | type(None))
    }


@contextlib.contextmanager
def _starting() -> Iterator[int]:
    fd = _wait_for_lock(STARTING)
    try:
        yield fd
    finally:
        os.close(fd)


def detach(args: argparse.Namespace, serve: Callable[..., int]) -> int:
    """Start `serve(args)` in the background and print its environment once it is ready (or
    the environment of the stack already running from this directory)."""
    with _starting() as starting:
        lock = _lock(LOCK)
        if lock is None:
            return _already_running(args)
        STATE.unlink(missing_ok=True)  # the lock was free: whatever it says is stale
        LOG.parent.mkdir(parents=True, exist_ok=True)
        sys.stdout.flush()
        sys.stderr.flush()
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the stack's process: it keeps the lock, and never returns
            os.close(read_end)
            os.close(starting)  # or the next `up --detach` would wait for it to end
            _serve_detached(args, serve, write_end)
        os.close(write_end)
        os.close(lock)  # the stack's process holds it now, until it ends
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
        f"local stack running in the background (pid {pid}, on {note['endpoint']}; its log: "
        f"{LOG}); vhs local down stops it",
        file=sys.stderr,
    )
    return 0


def _already_running(args: argparse.Namespace) -> int:
    found = find()
    note = found.note
    if note is None:
        print(f"error: {found.problem}: vhs local status says more", file=sys.stderr)
        return 1
    if note.get("options") != _options(args):
        print(
            f"error: a local stack with other options is running here (pid {note['pid']}, on "
            f"{note['endpoint']}): stop it first with vhs local down",
            file=sys.stderr,
        )
        return 2
    print(
        f"a local stack is already running here (pid {note['pid']}, on {note['endpoint']}; its "
        f"log: {note['log']}); its environment follows",
        file=sys.stderr,
    )
    print_env(note["env"], as_json=args.json)
    return 0


def _serve_detached(args: argparse.Namespace, serve: Callable[..., int], pipe: int) -> None:
    """In the forked process: a session of its own, standard input from /dev/null, standard
    output to the pipe until "ready" and to the log after it (so that nothing the stack
    prints later can fail on a reader that has gone), standard error to the log."""
    from ..errors import LocalStackError

    status = 1
    try:
        os.setsid()
        log = os.open(LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(pipe, 1)
        os.dup2(log, 2)
        os.close(pipe)
        identity = process_identity(os.getpid())

        def ready(env: dict[str, str], endpoint: str, since: str) -> None:
            note = {
                "pid": os.getpid(),
                "process": identity.as_dict() if identity else None,
                "directory": str(Path.cwd()),
                "endpoint": endpoint,
                "port": int(endpoint.rpartition(":")[2]),
                "since": since,
                "env": env,
                "log": str(LOG),
                "options": _options(args),
            }
            partial = STATE.with_name(STATE.name + ".tmp")
            partial.write_text(json.dumps(note, indent=2), encoding="utf-8")
            os.replace(partial, STATE)  # never half a note
            print("ready", flush=True)
            os.dup2(log, 1)

        status = serve(
            argparse.Namespace(**{**vars(args), "json": False}), ready=ready, detached=True
        )
    except LocalStackError as error:  # the parent reads this line from the log
        print(f"error: {' '.join(str(error).split())}", file=sys.stderr, flush=True)
    except BaseException as error:  # the log is the only place left to say so
        text = " ".join(str(error).split())
        print(f"error: {type(error).__name__}: {text}", file=sys.stderr, flush=True)
    finally:
        note = _read_note()
        if note is not None and note.get("pid") == os.getpid():
            STATE.unlink(missing_ok=True)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def cmd_local_down(args: argparse.Namespace) -> int:
    """Stop the stack `vhs local up --detach` started from this directory, and wait until it
    has (it finishes the batch in hand first). Only a process proved to be that stack is
    signalled."""
    found = find()
    if found.problem is not None:
        print(f"error: {found.problem}: nothing was signalled", file=sys.stderr)
        if args.json:
            emit_json({"stopped": None, "problem": found.problem})
        return 1
    if found.note is None:
        if args.json:
            emit_json({"stopped": None})
        else:
            print("no local stack is running from this directory" + _stale(found), file=sys.stderr)
        return 0
    pid = int(found.note["pid"])
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_SECONDS
    # The lock is released when the stack's process ends, however it ends.
    while _held(LOCK):
        if time.monotonic() > deadline:
            print(
                f"error: the local stack (pid {pid}) did not stop in {STOP_SECONDS:g}s",
                file=sys.stderr,
            )
            return 1
        time.sleep(0.1)
    if args.json:
        emit_json({"stopped": pid})
    else:
        print(f"stopped the local stack (pid {pid}); what it held is gone", file=sys.stderr)
    return 0


def _stale(found: Found) -> str:
    if found.stale is None:
        return ""
    return (
        f" (the note of one that has gone, pid {found.stale.get('pid')!r}, is removed; "
        "no process was signalled)"
    )


def cmd_local_status(args: argparse.Namespace) -> int:
    """What runs from this directory (its pid, directory, port and since when), and who
    holds the port a new stack here would take. Exit 0 when a stack runs from here, 3 when
    none does."""
    from vhs import settings
    from vhs.shapes.local import DEFAULT_PORT

    found = find()
    port = settings.whole_number(settings.LOCAL_PORT, DEFAULT_PORT)
    note = found.note
    holder = None if note is not None and note["port"] == port else port_holder(port)
    status = {
        "running": note is not None,
        "pid": note and note["pid"],
        "directory": str(Path.cwd()),
        "endpoint": note and note["endpoint"],
        "port": note and note["port"],
        "since": note and note["since"],
        "log": note and note["log"],
        "problem": found.problem,
        "default_port": port,
        "default_port_held_by": holder,
    }
    if args.json:
        emit_json(status)
    elif note is not None:
        print(
            f"running: the local stack from {status['directory']} (pid {note['pid']}), on "
            f"{note['endpoint']} (port {note['port']}), since {note['since']}; its log: "
            f"{note['log']}"
        )
    else:
        print(f"not running: no local stack runs from {status['directory']}" + _stale(found))
        if found.problem is not None:
            print(f"  {found.problem}")
    if note is None and holder is not None:
        print(f"  {holder}", file=sys.stdout if not args.json else sys.stderr)
    return 0 if note is not None else 3
