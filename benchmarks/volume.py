"""The local stack at volume: messages through `vhs local up` and `vhs send`, the real commands
as a user runs them, nothing lost, and how the long-running local commands scale."""

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
from pathlib import Path
from typing import Any

from vhs import settings
from vhs.local.stack import environment, free_port
from vhs.operator.dlq import queue_depth
from vhs.store import VersionedHybridStore

from .common import Progress, Report, peak_rss_mb, table

VHS = [sys.executable, "-m", "vhs.cli"]
SEED = 17
GOAL = 0.8  # the 100,000-message rate is at least 0.8x the 1,000-message rate
T0 = 1_767_225_600  # 2026-01-01T00:00:00Z


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--messages", type=int, help="default 100,000 (quick: 2,000)")
    parser.add_argument("--baseline", type=int, help="default 1,000 (quick: 200)")
    help = "also run the stack as it was, for so long (default 600; quick: no)"
    parser.add_argument("--before", type=float, metavar="SECONDS", help=help)
    parser.add_argument("--scaling-only", action="store_true")
    parser.add_argument("--no-scaling", action="store_true")


def stamp(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def dataset(count: int, path: Path, seed: int = SEED) -> dict[str, Any]:
    """Write `count` messages to `path`; what a complete run must then hold."""
    rng = random.Random(seed)
    lines: list[str] = []
    latest: dict[str, int] = {}  # id -> the updated_at (seconds) of its latest version
    invalid = 0
    n_id = 0
    while len(lines) < count:
        if rng.random() < 0.05:  # one in 20 draws, against about 5 versions per id: 1 %
            body = {"id": f"bad-{len(lines)}", "updated_at": "2026-01-01T00:00:00", "record": {}}
            lines.append(json.dumps(body))
            invalid += 1
            continue
        record_id = f"rec-{n_id:06d}"
        n_id += 1
        for version in range(min(rng.randint(3, 7), count - len(lines))):
            size = rng.random()
            if size < 0.002:
                payload = rng.randint(300_000, 400_000)
            elif size < 0.032:
                payload = rng.randint(20_000, 100_000)
            else:
                payload = rng.randint(600, 1_400)
            at = T0 + version * 60
            record = {"title": f"{record_id} v{version}", "text": "x" * payload}
            lines.append(json.dumps({"id": record_id, "updated_at": stamp(at), "record": record}))
            latest[record_id] = at
    rng.shuffle(lines)
    path.write_text("\n".join(lines) + "\n")
    return {"count": len(lines), "latest": latest, "invalid": invalid, "bytes": path.stat().st_size}


class LocalUp:
    """`vhs local up --json` in a child process: its environment, and its processes' peak RSS."""

    def __init__(self, *args: str) -> None:
        self.log = tempfile.NamedTemporaryFile(suffix=".log", delete=False)  # noqa: SIM115
        command = [*VHS, "local", "up", "--json", "--port", str(free_port())]
        command += ["--function-log", self.log.name, *args]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, text=True, env=dict(os.environ)
        )
        text = []
        assert self.process.stdout
        for line in self.process.stdout:
            if line.strip() == "ready":
                break
            text.append(line)
        self.env = {**os.environ, **json.loads("".join(text))}

    def peak_rss_mb(self) -> dict[str, float]:
        pids = {"vhs local up": self.process.pid}
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        for child in children.read_text().split():
            pids["moto server"] = int(child)
        return {name: peak_rss_mb(pid) for name, pid in pids.items()}

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)
        os.unlink(self.log.name)


def sqs_client(env: dict[str, str]) -> Any:
    import boto3

    return boto3.client(
        "sqs",
        endpoint_url=env["AWS_ENDPOINT_URL"],
        region_name=env["AWS_DEFAULT_REGION"],
        aws_access_key_id="testing",
        aws_secret_access_key="testing",  # moto's fake credentials
    )


def held(sqs: Any, url: str) -> int:
    depth = queue_depth(sqs, url)
    return depth.visible + depth.in_flight + depth.delayed


def drained(sqs: Any, url: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    empty = 0
    while time.monotonic() < deadline:
        empty = empty + 1 if held(sqs, url) == 0 else 0
        if empty == 2:
            return True
        time.sleep(0.5)
    return False


_PROGRESS = re.compile(r"progress: ([\d,]+) of [\d,]+ lines at (\d+)s")


def pipeline_run(
    count: int,
    work: Path,
    *,
    as_is: bool = False,
    cap_seconds: float | None = None,
    check: bool = True,
) -> dict[str, Any]:
    """`count` messages through a fresh `vhs local up` with `vhs send`. `as_is`: the stack as
    it was before (moto's SQS scanning, the watch queue subscribed, no flow control),
    stopped after `cap_seconds`."""
    data_file = work / f"messages-{count}.jsonl"
    expected = dataset(count, data_file)
    stack = LocalUp(*(("--moto-sqs-as-is", "--watch-queue") if as_is else ()))
    try:
        sqs = sqs_client(stack.env)
        send = [*VHS, "--json", "send", str(data_file), "--no-validate"]
        if as_is:
            send += ["--max-queued", "0"]
        started = time.monotonic()
        sender = subprocess.Popen(
            send, env=stack.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            out, err = sender.communicate(timeout=cap_seconds)
        except subprocess.TimeoutExpired:
            sender.terminate()  # Ctrl-C's path: it stops between batches with its summary
            out, err = sender.communicate(timeout=120)
        summary = json.loads(out)
        progress = [(int(s), int(n.replace(",", ""))) for n, s in _PROGRESS.findall(err)]
        if cap_seconds is not None and summary["interrupted"]:
            left = held(sqs, stack.env[settings.QUEUE_URL])
            elapsed = time.monotonic() - started
            return {
                "count": count,
                "capped": True,
                "seconds": elapsed,
                "sent": summary["sent"],
                "backlog": left,
                "processed": summary["sent"] - left,
                "rate": (summary["sent"] - left) / elapsed,
                "progress": progress,
                "peak_rss_mb": stack.peak_rss_mb(),
            }
        ok = drained(sqs, stack.env[settings.QUEUE_URL], timeout=3600)
        seconds = time.monotonic() - started
        result = {
            "count": count,
            "capped": False,
            "drained": ok,
            "seconds": seconds,
            "send_seconds": summary["seconds"],
            "sent": summary["sent"],
            "claim_checks": summary["claim_checks"],
            "not_sent": len(summary["not_sent"]),
            "queue_wait_seconds": summary["queue_wait_seconds"],
            "rate": count / seconds,
            "progress": progress,
            "peak_rss_mb": stack.peak_rss_mb(),
            "invalid": expected["invalid"],
            "ids": len(expected["latest"]),
            "bytes": expected["bytes"],
        }
        if check:
            result.update(nothing_lost(stack.env, expected))
        return result
    finally:
        stack.stop()


def nothing_lost(env: dict[str, str], expected: dict[str, Any]) -> dict[str, Any]:
    """Every valid id at its latest version, and exactly the invalid messages in the DLQ."""
    wrong = []
    with environment(env):
        store = VersionedHybridStore.from_env()
        for record_id, at in expected["latest"].items():
            record = store.get(record_id)
            if int(record.updated_at.timestamp()) != at:
                wrong.append(record_id)
    sqs = sqs_client(env)
    in_dlq = held(sqs, env[settings.DLQ_URL])
    return {
        "latest_wrong": len(wrong),
        "in_dlq": in_dlq,
        "nothing_lost": not wrong and in_dlq == expected["invalid"],
    }


def slices(result: dict[str, Any], parts: int = 10) -> list[tuple[str, float]]:
    """The rate through each tenth of the messages, from `vhs send`'s progress lines."""
    points = [(0, 0), *result["progress"], (result["send_seconds"], result["count"])]
    out = []
    for k in range(1, parts + 1):
        lo, hi = result["count"] * (k - 1) / parts, result["count"] * k / parts
        t_lo = _time_at(points, lo)
        t_hi = _time_at(points, hi)
        out.append((f"{(k - 1) * 100 // parts}-{k * 100 // parts} %", (hi - lo) / (t_hi - t_lo)))
    return out


def _time_at(points: list[tuple[float, float]], done: float) -> float:
    for (t0, n0), (t1, n1) in itertools.pairwise(points):
        if n1 >= done:
            return t0 + (t1 - t0) * ((done - n0) / (n1 - n0) if n1 > n0 else 0)
    return points[-1][0]


def timed(env: dict[str, str], *args: str) -> float:
    started = time.monotonic()
    result = subprocess.run([*VHS, "--json", *args], env=env, capture_output=True, timeout=7200)
    if result.returncode not in (0, 1):
        raise RuntimeError(f"vhs {' '.join(args)}: {result.stderr.decode()[-500:]}")
    return time.monotonic() - started


def scaling(work: Path, factors: Sequence[int] = (1, 10, 100)) -> dict[str, list[float]]:
    """Seconds for gc and verify over 100/1,000/10,000 records (a tenth with bodies in S3, a
    tenth with an orphan object), dlq list over as many letters,
    and send (no consumer, no flow control) of 1/10/100 MB files."""
    from concurrent.futures import ThreadPoolExecutor

    out: dict[str, list[float]] = {"gc": [], "verify": [], "dlq list": [], "send": []}
    for factor in factors:
        stack = LocalUp("--no-pipeline")
        try:
            with environment(stack.env):
                store = VersionedHybridStore.from_env()

                def put(n: int, store: Any = store) -> None:
                    # A tenth of the records have bodies in S3 (random text does not compress
                    # under the inline threshold), and a tenth of the ids an orphan beside
                    # them, as a writer that crashed after its upload leaves one: the
                    # collector lists, judges and (dry run) reports every one.
                    big = n % 10 == 0
                    text = random.Random(n).randbytes(25_000).hex() if big else "y" * 200
                    record_id = f"s-{n:06d}"
                    store.put(record_id, {"n": n, "text": text}, updated_at=stamp(T0))
                    if n % 10 == 5:
                        orphan = random.Random(-n).randbytes(20_000)
                        key = store.body_key(record_id, hashlib.sha256(orphan).hexdigest())
                        store.bodies.s3.put_object(Bucket=store.bucket_name, Key=key, Body=orphan)

                with ThreadPoolExecutor(8) as pool:
                    list(pool.map(put, range(100 * factor)))
            out["gc"].append(timed(stack.env, "gc", "--dry-run", "--grace", "0s"))
            out["verify"].append(timed(stack.env, "verify"))
        finally:
            stack.stop()
        stack = LocalUp()
        try:
            sqs = sqs_client(stack.env)
            dlq = stack.env[settings.DLQ_URL]
            for start in range(0, 100 * factor, 10):
                sqs.send_message_batch(
                    QueueUrl=dlq,
                    Entries=[
                        {"Id": str(n), "MessageBody": json.dumps({"id": f"d{start + n}"})}
                        for n in range(10)
                    ],
                )
            out["dlq list"].append(timed(stack.env, "dlq", "list"))
            plain = sqs.create_queue(QueueName=f"send-{factor}")["QueueUrl"]
            lines = work / f"send-{factor}.jsonl"
            line = json.dumps({"id": "x", "updated_at": stamp(T0), "record": "z" * 1000})
            lines.write_text((line + "\n") * (factor * 1024 * 1024 // (len(line) + 1)))
            env = {**stack.env, settings.QUEUE_URL: plain}
            out["send"].append(timed(env, "send", str(lines), "--max-queued", "0"))
        finally:
            stack.stop()
    return out


def run(args: argparse.Namespace, options: argparse.Namespace, progress: Progress) -> Report:
    count = options.messages or (2_000 if args.quick else 100_000)
    baseline = options.baseline or (200 if args.quick else 1_000)
    before = options.before if options.before is not None else (None if args.quick else 600)
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
                old = result["before"] = pipeline_run(count, work, as_is=True, cap_seconds=before)
                rows = [["before", f"{old['seconds']:,.0f}", f"{old['processed']:,}",
                         f"{old['rate']:.1f}", f"{old['backlog']:,}",
                         f"{old['peak_rss_mb'].get('moto server', 0):,.0f} MB"],
                        ["after", f"{big['seconds']:,.0f}", f"{big['count']:,}",
                         f"{big['rate']:.1f}", "0",
                         f"{big['peak_rss_mb'].get('moto server', 0):,.0f} MB"]]  # fmt: skip
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
