"""docs/benchmarks.md, "The local stack at volume": the real commands as a user runs them."""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from vhs import settings
from vhs.store import VersionedHybridStore
from vhs_ops.admin.dlq import queue_depth
from vhs_ops.local.process_environment import environment
from vhs_ops.local.stack import client, free_port

from .common import Progress, Report, peak_rss_mb, table

VHS = [sys.executable, "-m", "vhs_ops.cli"]
SEED = 17
GOAL = 0.8  # the 100,000-message rate is at least 0.8x the 1,000-message rate
T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
# Record sizes: (cumulative share, bytes from, to): 0.2 % of 300-400 KB, 3 % of 20-100 KB.
PAYLOADS = ((0.002, 300_000, 400_000), (0.032, 20_000, 100_000), (1.0, 600, 1_400))
OPTIONS = {
    "--messages": (int, 100_000, 2_000, "messages"),
    "--baseline": (int, 1_000, 200, "messages of the run to compare with"),
    "--before": (float, 600, None, "seconds to run the stack as it was, too"),
    "--scaling-only": (bool, False, False, "only the long-running commands' scaling"),
    "--no-scaling": (bool, False, False, "no scaling"),
}


def stamp(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def dataset(count: int, path: Path) -> dict[str, Any]:
    """Write `count` messages to `path`; what a complete run must then hold."""
    rng = random.Random(SEED)
    lines: list[str] = []
    latest: dict[str, int] = {}  # id -> the updated_at (seconds) of its latest version
    invalid = n_id = 0
    while len(lines) < count:
        if rng.random() < 0.05:  # one in 20 draws, against about 5 versions per id: 1 %
            body = {"id": f"bad-{len(lines)}", "updated_at": "2026-01-01T00:00:00", "record": {}}
            lines.append(json.dumps(body))
            invalid += 1
            continue
        record_id = f"rec-{n_id:06d}"
        n_id += 1
        for version in range(min(rng.randint(3, 7), count - len(lines))):
            draw = rng.random()
            payload = next(rng.randint(low, high) for share, low, high in PAYLOADS if draw < share)
            at = T0 + version * 60
            record = {"title": f"{record_id} v{version}", "text": "x" * payload}
            lines.append(json.dumps({"id": record_id, "updated_at": stamp(at), "record": record}))
            latest[record_id] = at
    rng.shuffle(lines)
    path.write_text("\n".join(lines) + "\n")
    return {"count": len(lines), "latest": latest, "invalid": invalid, "bytes": path.stat().st_size}


class LocalUp:
    """`vhs local up --json` in a child process: its environment, its processes' peak RSS."""

    def __init__(self, *args: str) -> None:
        self.args = args

    def __enter__(self) -> LocalUp:
        self.log = tempfile.NamedTemporaryFile(suffix=".log", delete=False)
        command = [*VHS, "local", "up", "--json", "--port", str(free_port())]
        command += ["--function-log", self.log.name, *self.args]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout
        text = itertools.takewhile(lambda line: line.strip() != "ready", self.process.stdout)
        self.env = {**os.environ, **json.loads("".join(text))}
        endpoint, region = self.env["AWS_ENDPOINT_URL"], self.env["AWS_DEFAULT_REGION"]
        self.sqs = client("sqs", endpoint, region)
        return self

    def peak_rss_mb(self) -> dict[str, float]:
        pid = self.process.pid
        pids = {"vhs local up": pid}
        for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            pids["moto server"] = int(child)
        return {name: peak_rss_mb(pid) for name, pid in pids.items()}

    def held(self, name: str) -> int:
        """The messages the queue `name` (a vhs.settings name) holds."""
        depth = queue_depth(self.sqs, self.env[name])
        return depth.visible + depth.in_flight + depth.delayed

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)
        os.unlink(self.log.name)


PROGRESS = re.compile(r"progress: ([\d,]+) of [\d,]+ lines at (\d+)s")


def pipeline_run(count: int, work: Path, as_is: bool = False, cap: float | None = None) -> dict:
    """`count` messages through a fresh `vhs local up` with `vhs send`; `as_is`: through the
    stack as it was before (docs/benchmarks.md), stopped after `cap` seconds."""
    expected = dataset(count, work / f"messages-{count}.jsonl")
    with LocalUp(*(("--moto-sqs-as-is", "--watch-queue") if as_is else ())) as stack:
        send = [*VHS, "--json", "send", str(work / f"messages-{count}.jsonl"), "--no-validate"]
        send += ["--max-queued", "0"] if as_is else []
        started = time.monotonic()
        pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
        sender = subprocess.Popen(send, env=stack.env, text=True, **pipes)
        try:
            out, err = sender.communicate(timeout=cap)
        except subprocess.TimeoutExpired:
            sender.terminate()  # Ctrl-C's path: it stops between batches with its summary
            out, err = sender.communicate(timeout=120)
        summary = json.loads(out)
        points = [(int(s), int(n.replace(",", ""))) for n, s in PROGRESS.findall(err)]
        found = {"count": count, "sent": summary["sent"], "peak_rss_mb": stack.peak_rss_mb(),
                 "progress": points}  # fmt: skip
        if cap is not None and summary["interrupted"]:
            left, seconds = stack.held(settings.QUEUE_URL), time.monotonic() - started
            processed = summary["sent"] - left
            return found | {"seconds": seconds, "backlog": left, "processed": processed,
                            "rate": processed / seconds}  # fmt: skip
        empty = 0
        while empty < 2:  # empty twice in a row: drained
            empty = 0 if stack.held(settings.QUEUE_URL) else empty + 1
            time.sleep(0.5)
        seconds = time.monotonic() - started
        with environment(stack.env):  # every valid id at its latest version
            store = VersionedHybridStore.from_env()
            wrong = [i for i, at in expected["latest"].items()
                     if int(store.get(i).updated_at.timestamp()) != at]  # fmt: skip
        in_dlq = stack.held(settings.DLQ_URL)
        return found | {
            "seconds": seconds, "rate": count / seconds, "send_seconds": summary["seconds"],
            "claim_checks": summary["claim_checks"], "not_sent": len(summary["not_sent"]),
            "queue_wait_seconds": summary["queue_wait_seconds"], "invalid": expected["invalid"],
            "ids": len(expected["latest"]), "in_dlq": in_dlq, "latest_wrong": len(wrong),
            "nothing_lost": not wrong and in_dlq == expected["invalid"], "processed": count,
            "backlog": 0,
        }  # fmt: skip


def slices(result: dict[str, Any], parts: int = 10) -> list[tuple[str, float]]:
    """The rate through each tenth of the messages, from `vhs send`'s progress lines."""
    points = [(0, 0), *result["progress"], (result["send_seconds"], result["count"])]

    def time_at(done: float) -> float:
        for (t0, n0), (t1, n1) in itertools.pairwise(points):
            if n1 >= done:
                return t0 + (t1 - t0) * ((done - n0) / (n1 - n0) if n1 > n0 else 0)
        return points[-1][0]

    count = result["count"]
    return [(f"{(k - 1) * 100 // parts}-{k * 100 // parts} %",
             count / parts / (time_at(count * k / parts) - time_at(count * (k - 1) / parts)))
            for k in range(1, parts + 1)]  # fmt: skip


def timed(env: dict[str, str], *args: str) -> float:
    started = time.monotonic()
    result = subprocess.run([*VHS, "--json", *args], env=env, capture_output=True, timeout=7200)
    if result.returncode not in (0, 1):
        raise RuntimeError(f"vhs {' '.join(args)}: {result.stderr.decode()[-500:]}")
    return time.monotonic() - started


def scaling(work: Path, factors: Sequence[int]) -> dict[str, list[float]]:
    """Seconds of gc, verify, dlq list and send at each factor (docs/benchmarks.md)."""
    out: dict[str, list[float]] = {"gc": [], "verify": [], "dlq list": [], "send": []}
    for factor in factors:
        with LocalUp("--no-pipeline") as stack, environment(stack.env):
            store = VersionedHybridStore.from_env()

            def put(n: int, store: Any = store) -> None:
                big = n % 10 == 0  # random text does not compress under the inline threshold
                text = random.Random(n).randbytes(25_000).hex() if big else "y" * 200
                store.put(f"s-{n:06d}", {"n": n, "text": text}, updated_at=stamp(T0))
                if n % 10 == 5:  # as a writer that crashed after its upload leaves one
                    orphan = random.Random(-n).randbytes(20_000)
                    key = store.body_key(f"s-{n:06d}", hashlib.sha256(orphan).hexdigest())
                    store.bodies.s3.put_object(Bucket=store.bucket_name, Key=key, Body=orphan)

            with ThreadPoolExecutor(8) as pool:
                list(pool.map(put, range(100 * factor)))
            out["gc"].append(timed(stack.env, "gc", "--dry-run", "--grace", "0s"))
            out["verify"].append(timed(stack.env, "verify"))
        with LocalUp() as stack:
            for start in range(0, 100 * factor, 10):
                letters = [{"Id": str(n), "MessageBody": json.dumps({"id": f"d{start + n}"})}
                           for n in range(10)]  # fmt: skip
                stack.sqs.send_message_batch(QueueUrl=stack.env[settings.DLQ_URL], Entries=letters)
            out["dlq list"].append(timed(stack.env, "dlq", "list"))
            plain = stack.sqs.create_queue(QueueName=f"send-{factor}")["QueueUrl"]
            lines = work / f"send-{factor}.jsonl"
            line = json.dumps({"id": "x", "updated_at": stamp(T0), "record": "z" * 1000})
            lines.write_text((line + "\n") * (factor * 1024 * 1024 // (len(line) + 1)))
            env = {**stack.env, settings.QUEUE_URL: plain}
            out["send"].append(timed(env, "send", str(lines), "--max-queued", "0"))
    return out


def run(args: argparse.Namespace, options: argparse.Namespace, progress: Progress) -> Report:
    count, baseline, before = options.messages, options.baseline, options.before
    result: dict[str, Any] = {}
    sections = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if not options.scaling_only:
            progress(f"{baseline:,} then {count:,} messages through vhs local up")
            small, big = pipeline_run(baseline, work), pipeline_run(count, work)
            result |= {"small": small, "big": big}
            rows = [[f"{r['count']:,}", f"{r['ids']:,}", f"{r['seconds']:,.0f}", f"{r['rate']:.1f}",
                     r["claim_checks"], f"{r['in_dlq']} of {r['invalid']}",
                     "yes" if r["nothing_lost"] else "NO",
                     f"{r['peak_rss_mb'].get('vhs local up', 0):,.0f} MB",
                     f"{r['peak_rss_mb'].get('moto server', 0):,.0f} MB"]
                    for r in (small, big)]  # fmt: skip
            ratio = big["rate"] / small["rate"]
            parts = slices(big)
            sections["volume"] = "\n\n".join([
                f"Run {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores.",
                table(["messages", "ids", "seconds", "messages/s", "claim checks", "in the DLQ",
                       "nothing lost", "peak RSS: vhs local up", "peak RSS: moto server"], rows, 1),
                f"Rate at {big['count']:,} against {small['count']:,}: **{ratio:.2f}x** (goal "
                f"{GOAL}x: {'met' if ratio >= GOAL else 'not met'}). `vhs send` waited on the "
                f"queue for {big['queue_wait_seconds']:,.0f} s of {big['send_seconds']:,.0f} s.",
                table(["slice", *(name for name, _ in parts)],
                      [["messages/s", *(f"{r:.1f}" for _, r in parts)]], right=1),
            ])  # fmt: skip
            if before:
                progress(f"{count:,} messages through the stack as it was, for {before:.0f} s")
                old = result["before"] = pipeline_run(count, work, as_is=True, cap=before)
                rows = [[label, f"{r['seconds']:,.0f}", f"{r['processed']:,}", f"{r['rate']:.1f}",
                         f"{r['backlog']:,}", f"{r['peak_rss_mb'].get('moto server', 0):,.0f} MB"]
                        for label, r in (("before", old), ("after", big))]  # fmt: skip
                headers = ["", "seconds", "processed", "messages/s", "backlog left",
                           "peak RSS: moto server"]  # fmt: skip
                sections["volume.before"] = table(headers, rows, right=1)
        if not options.no_scaling:
            progress("scaling of gc, verify, dlq list and send")
            factors = (1, 2, 3) if args.quick else (1, 10, 100)
            scale = result["scaling"] = scaling(work, factors)
            rows = [[f"`vhs {name}`", *(f"{t:.1f}" for t in times), f"{times[2] / times[1]:.1f}"]
                    for name, times in scale.items()]  # fmt: skip
            headers = ["command", *(f"{f}x" for f in factors), f"{factors[2]}x / {factors[1]}x"]
            sections["volume.scaling"] = table(headers, rows, right=1)
    return Report(sections, result)
