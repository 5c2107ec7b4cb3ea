"""The local stack at volume (issue 17): messages through `vhs local up` and `vhs send`, the
real commands as a user runs them, and how the long-running local commands scale.

    .venv/bin/python benchmarks/volume.py                    100,000 messages, 1,000 to compare
    .venv/bin/python benchmarks/volume.py --messages 20000 --before 600
                                       ... and the same with moto's SQS as it is (the "before")
    .venv/bin/python benchmarks/volume.py --scaling-only     gc, verify, dlq list, send at 1/10/100x
    .venv/bin/python benchmarks/volume.py --write PATH       ... and write its section of PATH

`--write` replaces only the section between `<!-- volume:start -->` and `<!-- volume:end -->`.

The messages: ids with about five versions each (3 to 7), shuffled; about 1 % invalid (no UTC
offset: the handler dead-letters them); about 3 % with records of 20-100 KB and 0.2 % of over
300 KB (sent by claim check); the rest about 1 KB. `vhs send --no-validate` sends them all, so
the invalid ones travel the pipeline to the DLQ. Timed from the start of `vhs send` until the
ingest queue is empty. The rate over time comes from `vhs send`'s progress lines (the rate the
queue accepts: with flow control, within 1,000 messages of what the pipeline has taken).
Nothing lost: every valid id's latest version is read back with the store, and the DLQ holds
exactly the invalid messages. Peak memory: VmHWM of `vhs local up` and of its moto server.
"""

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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sections

ROOT = Path(__file__).resolve().parent.parent
VHS = [sys.executable, "-m", "vhs.cli"]
SECTION = "volume"
SEED = 17
GOAL = 0.8  # issue 17: the 100,000-message rate is at least 0.8x the 1,000-message rate
T0 = 1_767_225_600  # 2026-01-01T00:00:00Z


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "lambdas"), *filter(None, [env.get("PYTHONPATH")])]
    )
    return env


# --- the messages ---------------------------------------------------------------------------


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


# --- the stack ------------------------------------------------------------------------------


class LocalUp:
    """`vhs local up --json` in a child process: its environment, and its processes' peak RSS."""

    def __init__(self, *args: str) -> None:
        from vhs.local.stack import free_port

        self.log = tempfile.NamedTemporaryFile(suffix=".log", delete=False)  # noqa: SIM115
        command = [*VHS, "local", "up", "--json", "--port", str(free_port())]
        command += ["--function-log", self.log.name, *args]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=child_env())
        text = []
        assert self.process.stdout
        for line in self.process.stdout:
            if line.strip() == "ready":
                break
            text.append(line)
        self.env = {**child_env(), **json.loads("".join(text))}

    def peak_rss_mb(self) -> dict[str, float]:
        pids = {"vhs local up": self.process.pid}
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        for child in children.read_text().split():
            pids["moto server"] = int(child)
        peaks = {}
        for name, pid in pids.items():
            status = Path(f"/proc/{pid}/status").read_text()
            kb = int(re.search(r"VmHWM:\s+(\d+)", status)[1])  # type: ignore[index]
            peaks[name] = kb / 1024
        return peaks

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
    from vhs.ingest.dlq import queue_depth

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


# --- a pipeline run -------------------------------------------------------------------------

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
    it was before issue 17 (moto's SQS scanning, the watch queue subscribed, no flow control),
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
            left = held(sqs, stack.env["VHS_QUEUE_URL"])
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
        ok = drained(sqs, stack.env["VHS_QUEUE_URL"], timeout=3600)
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
    from vhs.local.stack import environment
    from vhs.store import VersionedHybridStore

    wrong = []
    with environment(env):
        store = VersionedHybridStore.from_env()
        for record_id, at in expected["latest"].items():
            record = store.get(record_id)
            if int(record.updated_at.timestamp()) != at:
                wrong.append(record_id)
    sqs = sqs_client(env)
    in_dlq = held(sqs, env["VHS_DLQ_URL"])
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


# --- scaling of the other long-running commands --------------------------------------------


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

    from vhs.local.stack import environment
    from vhs.store import VersionedHybridStore

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
            dlq = stack.env["VHS_DLQ_URL"]
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
            env = {**stack.env, "VHS_QUEUE_URL": plain}
            out["send"].append(timed(env, "send", str(lines), "--max-queued", "0"))
        finally:
            stack.stop()
    return out


# --- the report -----------------------------------------------------------------------------


def markdown(result: dict[str, Any]) -> str:
    lines = ["## The local stack at volume (issue 17)", ""]
    big, small = result.get("big"), result.get("small")
    if big and small:
        ratio = big["rate"] / small["rate"]
        lines += [
            f"`benchmarks/volume.py` ({result['when']}, {result['machine']}): messages through "
            "`vhs local up` with `vhs send --no-validate`, the real commands, timed from the "
            "start of the send until the ingest queue is empty. Ids with 3-7 versions "
            "shuffled, 1 % invalid, 3 % of 20-100 KB, 0.2 % of 300-400 KB (claim checks "
            "only if over the queue's limit: SQS now takes 1 MiB).",
            "",
            "| messages | ids | seconds | messages/s | claim checks | in the DLQ | nothing lost "
            "| peak RSS: vhs local up | peak RSS: moto server |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |",
        ]
        for run in (small, big):
            rss = run["peak_rss_mb"]
            lines.append(
                f"| {run['count']:,} | {run['ids']:,} | {run['seconds']:,.0f} | "
                f"{run['rate']:.1f} | {run['claim_checks']} | {run['in_dlq']} of "
                f"{run['invalid']} | {'yes' if run['nothing_lost'] else 'NO'} | "
                f"{rss.get('vhs local up', 0):,.0f} MB | {rss.get('moto server', 0):,.0f} MB |"
            )
        lines += [
            "",
            f"Rate at {big['count']:,} against {small['count']:,}: **{ratio:.2f}x** "
            f"(goal {GOAL}x: {'met' if ratio >= GOAL else 'not met'}). "
            f"`vhs send` waited on the queue for {big['queue_wait_seconds']:,.0f} s of "
            f"{big['send_seconds']:,.0f} s: the pipeline set the pace.",
            "",
            "Rate over time (each tenth of the messages, as `vhs send` had them accepted):",
            "",
            "| slice | " + " | ".join(name for name, _ in slices(big)) + " |",
            "| --- |" + " ---: |" * 10,
            "| messages/s | " + " | ".join(f"{r:.1f}" for _, r in slices(big)) + " |",
            "",
        ]
    before, after = result.get("before"), result.get("after")
    if before and after:
        lines += [
            f"Before and after, {after['count']:,} messages: before is the stack as it was "
            "(moto's SQS scanning every message per call, the watch queue subscribed, "
            f"`vhs send` without flow control), stopped after {before['seconds']:,.0f} s.",
            "",
            "| | seconds | processed | messages/s | backlog left | peak RSS: moto server |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
            f"| before | {before['seconds']:,.0f} | {before['processed']:,} | "
            f"{before['rate']:.1f} | {before['backlog']:,} | "
            f"{before['peak_rss_mb'].get('moto server', 0):,.0f} MB |",
            f"| after | {after['seconds']:,.0f} | {after['count']:,} | {after['rate']:.1f} | 0 | "
            f"{after['peak_rss_mb'].get('moto server', 0):,.0f} MB |",
            "",
        ]
    scale = result.get("scaling")
    if scale:
        lines += [
            "Scaling of the other long-running local commands (seconds, one run each; gc and "
            "verify over 100 / 1,000 / 10,000 records, a tenth with bodies in S3 and a tenth "
            "with an orphan object beside them; `dlq list` "
            "over as many letters; `vhs send` of 1 / 10 / 100 MB to a queue with no consumer, "
            "`--max-queued 0`). Linear growth is 10x per step; each figure includes starting "
            "the CLI (about 0.5 s).",
            "",
            "| command | 1x | 10x | 100x | 100x / 10x |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        for name, times in scale.items():
            lines.append(
                f"| `vhs {name}` | {times[0]:.1f} | {times[1]:.1f} | {times[2]:.1f} | "
                f"{times[2] / times[1]:.1f} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--baseline", type=int, default=1_000)
    parser.add_argument("--before", type=float, metavar="SECONDS", help="also run the 'before'")
    parser.add_argument("--scaling-only", action="store_true")
    parser.add_argument("--no-scaling", action="store_true")
    parser.add_argument("--write", metavar="PATH")
    parser.add_argument("--json-out", metavar="PATH", help="also write the raw results here")
    args = parser.parse_args(argv)
    import platform

    result: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%d"),
        "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}",
    }
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if not args.scaling_only:
            result["small"] = pipeline_run(args.baseline, work)
            print(json.dumps(result["small"]), file=sys.stderr, flush=True)
            result["big"] = pipeline_run(args.messages, work)
            print(json.dumps(result["big"]), file=sys.stderr, flush=True)
            if args.before:
                result["after"] = result["big"]
                result["before"] = pipeline_run(
                    args.messages, work, as_is=True, cap_seconds=args.before
                )
                print(json.dumps(result["before"]), file=sys.stderr, flush=True)
        if not args.no_scaling:
            result["scaling"] = scaling(work)
            print(json.dumps(result["scaling"]), file=sys.stderr, flush=True)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2))
    text = markdown(result)
    print(text)
    if args.write:
        sections.write_section(args.write, SECTION, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
