"""Whose a local stack is: what its moto server says of its owner, who holds a port, and
whether a process is still the one a note names.

A pid alone proves nothing once a process has gone: the kernel hands the number to the next
process, and `kill` then reaches a stranger. So a stack is named by its pid together with
its process's start time and command line (`ProcessIdentity`), which a new process with the
same pid does not share; and every moto server the CLI starts answers OWNER_PATH with the
stack that started it, so a port a stack holds is refused naming that stack, and a server
that answers for another process is never taken for our own.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Served by vhs_ops.local.motoserver alongside moto's own paths (/moto-api/): no AWS API uses it.
OWNER_PATH = "/vhs-local/owner"
OWNER_SERVICE = "vhs-local"


@dataclass(frozen=True)
class ProcessIdentity:
    """What tells one process from a later one given the same pid: when it started (clock
    ticks since boot, and the boot) and its command line."""

    started: str
    command: list[str]

    def as_dict(self) -> dict[str, Any]:
        return {"started": self.started, "command": self.command}


def valid_pid(value: object) -> int | None:
    """`value` as a pid that names one process, or None. 0 and negative numbers name process
    groups or every process to kill(2), and 1 is init: none is ever a stack."""
    return value if type(value) is int and value > 1 else None


def process_identity(pid: int) -> ProcessIdentity | None:
    """The identity of the running process `pid`, or None when there is none (or it is a
    zombie: gone for our purposes)."""
    if valid_pid(pid) is None:
        return None
    proc = Path("/proc") / str(pid)
    try:
        stat = (proc / "stat").read_text()
        command = (proc / "cmdline").read_bytes()
    except OSError:
        return _ps_identity(pid) if not Path("/proc/self/stat").exists() else None
    # The command (field 2) may hold spaces and parentheses: the fields after it follow the
    # last ')'. State is field 3, the start time field 22.
    fields = stat.rpartition(")")[2].split()
    if fields[0] == "Z":
        return None
    boot = ""
    with contextlib.suppress(OSError):
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    args = [arg.decode(errors="replace") for arg in command.split(b"\0") if arg]
    return ProcessIdentity(f"{boot}:{fields[19]}", args)


def _ps_identity(pid: int) -> ProcessIdentity | None:
    """Without /proc (macOS): ps's start time and command."""
    # ps by its fixed path and fixed arguments, the pid an int (bandit B404, B603).
    import subprocess  # nosec B404

    try:
        shown = subprocess.run(  # nosec B603
            ["/bin/ps", "-o", "lstart=", "-o", "command=", "-p", str(pid)],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    if not shown:
        return None
    # lstart is five words: "Mon Dec  7 03:47:18 2026".
    words = shown.split()
    return ProcessIdentity(" ".join(words[:5]), words[5:])


def owner_of(endpoint: str, timeout: float = 2.0) -> dict[str, Any] | None:
    """What the moto server at `endpoint` says of the stack that started it, or None if it is
    not one the CLI started (or does not answer)."""
    try:
        # The URL is http://127.0.0.1:<port>/..., built by the callers (bandit B310).
        with urllib.request.urlopen(f"{endpoint}{OWNER_PATH}", timeout=timeout) as answer:  # nosec B310
            document = json.loads(answer.read())
    except (OSError, urllib.error.URLError, ValueError):
        return None
    if isinstance(document, dict) and document.get("service") == OWNER_SERVICE:
        return document
    return None


def describe_owner(owner: dict[str, Any]) -> str:
    """`the local stack started from /home/me/a (pid 4211, since 2026-12-07T03:47:18+00:00)`."""
    how = " in the background" if owner.get("detached") else " in the foreground"
    return (
        f"the local stack started{how} from {owner.get('directory')} "
        f"(pid {owner.get('pid')}, since {owner.get('since')})"
    )


def listening(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts connections on `host:port`."""
    with socket.socket() as probe:
        probe.settimeout(2.0)
        try:
            probe.connect((host, port))
        except OSError:
            return False
    return True


def port_holder(port: int) -> str | None:
    """Who holds `port` on 127.0.0.1, in words, or None when nothing listens there."""
    if not listening(port):
        return None
    owner = owner_of(f"http://127.0.0.1:{port}")
    if owner is None:
        return f"port {port} is held by another program (not a VHS local stack)"
    stop = (
        "vhs local down there stops it"
        if owner.get("detached")
        else "Ctrl-C in its terminal stops it"
    )
    return (
        f"port {port} is held by {describe_owner(owner)}: {stop}, or give another port "
        "(--port or VHS_LOCAL_PORT)"
    )


def this_owner(port: int, *, detached: bool, since: str) -> dict[str, Any]:
    """The owner document of a stack this process starts on `port`."""
    return {
        "service": OWNER_SERVICE,
        "pid": os.getpid(),
        "directory": str(Path.cwd()),
        "port": port,
        "since": since,
        "detached": detached,
    }
