"""The two state machines, executed on a deployed stage: what no local interpreter models.

moto's Step Functions interpreter runs our definitions (tests/ingest/test_state_machines_import.py,
tests/changes/test_state_machines_reindex.py), but not AWS's own limits and permissions: the
roles as IAM evaluates them (S3's 404 for a missing object only with the ListBucket that
`s3:prefix` confines to a prefix; the state machine's grants on its own child executions, its
ResultWriter and its manifest), the execution types' limits (EXPRESS children's five minutes,
STANDARD's history), the 256 KiB limit on an execution's input, a state's data and a Map's
output, and the SNS FIFO topic behind a reindex. These tests start one import and one reindex
on a stage and check what came out.

Skipped unless ``VHS_TEST_LIVE=1`` and ``VHS_TEST_STACK`` names the stage (``Vhs-<stage>``, or
any of its stack names): every name (state machines, buckets, table, topic) comes from the
stage's stack outputs, read with CloudFormation DescribeStacks, so nothing else needs
setting. Each test works under a unique prefix and id namespace and removes what it made.
How to run them, their cost and their cleanup: docs/deploy.md ("Live tests").
"""

from __future__ import annotations

import csv
import io
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import boto3
import pytest
from botocore.exceptions import ClientError

from vhs import StoreConfig, VersionedHybridStore
from vhs_ops.cli.stackconfig import STACK_SUFFIXES, stack_prefix
from vhs_testing.backends import live_enabled

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        not (live_enabled() and os.environ.get("VHS_TEST_STACK")),
        reason="live AWS: set VHS_TEST_LIVE=1 and VHS_TEST_STACK=Vhs-<stage> (docs/deploy.md)",
    ),
]

# How long an execution may take before the test gives up on it. An import of a few lines
# is a plan and one child (seconds); a retried chunk waits 30 s, then 120 s.
EXECUTION_DEADLINE_SECONDS = 600
# How long the subscriber queue is read for a reindex's replays after it succeeded.
DELIVERY_DEADLINE_SECONDS = 120
T = TypeVar("T")


def poll(check: Callable[[], T | None], deadline_seconds: float, what: str) -> T:
    """`check()` until it returns something, with growing pauses, or fail after the deadline:
    an API is polled, never slept on for a fixed time."""
    deadline = time.monotonic() + deadline_seconds
    pause = 1.0
    while True:
        found = check()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not after {deadline_seconds} s")
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 1.5, 15.0)


@dataclass(frozen=True)
class Stage:
    outputs: dict[str, str]  # every stack output of the stage, by its OutputKey
    region: str

    def client(self, service: str) -> Any:
        return boto3.client(service, region_name=self.region or None)

    def store(self) -> VersionedHybridStore:
        prefix = self.outputs["BodyPrefix"]
        return VersionedHybridStore(
            self.outputs["TableName"],
            self.outputs["BucketName"],
            StoreConfig(prefix="" if prefix == "(none)" else prefix),
            s3_client=self.client("s3"),
            dynamodb_client=self.client("dynamodb"),
        )

    def run(self, machine_output: str, name: str, given: dict[str, Any]) -> dict[str, Any]:
        """Start an execution of the state machine the output names and wait for its end:
        DescribeExecution's answer."""
        sfn = self.client("stepfunctions")
        arn = sfn.start_execution(
            stateMachineArn=self.outputs[machine_output], name=name, input=json.dumps(given)
        )["executionArn"]

        def ended() -> dict[str, Any] | None:
            described = sfn.describe_execution(executionArn=arn)
            return None if described["status"] == "RUNNING" else described

        return poll(ended, EXECUTION_DEADLINE_SECONDS, f"execution {arn}")


@pytest.fixture(scope="module")
def stage() -> Stage:
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION", "")
    cloudformation = boto3.client("cloudformation", region_name=region or None)
    prefix = stack_prefix(os.environ["VHS_TEST_STACK"])
    outputs: dict[str, str] = {}
    for suffix in STACK_SUFFIXES:
        try:
            (described,) = cloudformation.describe_stacks(StackName=f"{prefix}-{suffix}")["Stacks"]
        except ClientError as error:
            if "does not exist" in str(error):
                continue
            raise
        outputs.update({o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])})
    needed = {"ImportStateMachineArn", "ReindexStateMachineArn", "ChangeTopicArn", "TableName"}
    if needed - set(outputs):
        pytest.fail(f"{prefix}: no outputs {sorted(needed - set(outputs))}; deploy every stack")
    return Stage(outputs, region)


@pytest.fixture
def run_name() -> str:
    """A unique name: the execution's, the import's prefix and the ids' namespace."""
    return f"vhs-live-{datetime.now(UTC):%Y%m%d%H%M%S}-{uuid.uuid4().hex[:8]}"


def _delete_under(s3: Any, bucket: str, prefix: str) -> None:
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})


def _purge(store: VersionedHybridStore, ids: list[str]) -> None:
    """Purge the test's records: their versions go, a tombstone stays, and the collector
    removes the bodies."""
    for id in ids:
        store.delete(id, deleted_at=datetime.now(UTC), purge=True)


# --- import ------------------------------------------------------------------------------------


Refused = dict[tuple[str, int], str]


def _export(run: str, staging: str) -> tuple[dict[str, bytes], dict[str, Any], Refused]:
    """A small export: its files (name -> bytes), the records its good lines store (id ->
    record), and the lines it must refuse ((file, line) -> the field the report names)."""
    at = "2026-01-02T03:04:05Z"
    good = {f"{run}-j{n}": {"title": f"jsonl {n}", "n": n} for n in range(3)}
    missing_payload = f"s3://{staging}/incoming/{run}/never-staged.json"
    jsonl = [
        *(json.dumps({"id": id, "updated_at": at, "record": r}) for id, r in good.items()),
        "",  # blank: skipped, still numbered
        "{not json",
        json.dumps({"id": f"{run}-naive", "updated_at": "2026-01-02T03:04:05", "record": {}}),
        # A claim check of a payload that was never staged: S3 answers 404 only if the role's
        # ListBucket (s3:prefix incoming/*) covers the key, and the line is then refused;
        # a 403 would be retried and fail the chunk, and the execution with it.
        json.dumps({"id": f"{run}-gone", "updated_at": at, "record_location": missing_payload}),
    ]
    rows = io.StringIO()
    writer = csv.writer(rows, lineterminator="\n")
    writer.writerow(["id", "updated_at", "title"])
    writer.writerow([f"{run}-c1", at, "csv one"])
    writer.writerow([f"{run}-c2", "yesterday", "refused: not a timestamp"])
    writer.writerow([f"{run}-c3", at, 'a "quoted" title, with a comma'])
    good[f"{run}-c1"] = {"title": "csv one"}
    good[f"{run}-c3"] = {"title": 'a "quoted" title, with a comma'}
    files = {
        "a.jsonl": ("\n".join(jsonl) + "\n").encode(),
        "b.csv": rows.getvalue().encode(),
        "c.jsonl": b"",  # an empty file: nothing to import, nothing to fail
    }
    refused: Refused = {
        ("a.jsonl", 5): "body",
        ("a.jsonl", 6): "updated_at",
        ("a.jsonl", 7): "record_location",
        ("b.csv", 3): "updated_at",
    }
    return files, good, refused


def _reports(s3: Any, bucket: str, prefix: str) -> list[dict[str, Any]]:
    lines = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for listed in page.get("Contents", []):
            body = s3.get_object(Bucket=bucket, Key=listed["Key"])["Body"].read()
            lines += [json.loads(line) for line in body.splitlines() if line]
    return lines


def _map_results(s3: Any, execution_output: dict[str, Any]) -> list[dict[str, Any]]:
    """Every child's result, from the Distributed Map's ResultWriter files: a manifest that
    lists them by status, each a JSON array (or, with a WriterConfig, JSON Lines) of child
    executions whose `Output` is the child's output (JSON text, or the value itself)."""
    details = execution_output["import"]["ResultWriterDetails"]
    manifest = json.loads(
        s3.get_object(Bucket=details["Bucket"], Key=details["Key"])["Body"].read()
    )
    results = []
    for status, files in manifest["ResultFiles"].items():
        for file in files:
            body = s3.get_object(Bucket=details["Bucket"], Key=file["Key"])["Body"].read()
            text = body.decode().strip()
            children = (
                json.loads(text) if text.startswith("[") else map(json.loads, text.splitlines())
            )
            for child in children:
                output = child.get("Output") or "{}"
                output = json.loads(output) if isinstance(output, str) else output
                results.append({"status": status, "output": output})
    return results


def _delete_map_run_results(stage: Stage, ended: dict[str, Any]) -> None:
    """Delete the ResultWriter's files of the execution's Map Runs. They are under the
    results prefix by Map Run id (the Map Run ARN's last part): where the output names the
    manifest, beside it; otherwise (a failed execution) under the prefix and that id."""
    sfn, s3 = stage.client("stepfunctions"), stage.client("s3")
    bucket, prefix = stage.outputs["ImportBucketName"], stage.outputs["ImportResultsPrefix"]
    folders = set()
    written = json.loads(ended.get("output") or "{}").get("import", {}).get("ResultWriterDetails")
    if written:
        folders.add(written["Key"].rsplit("/", 1)[0] + "/")
    for run in sfn.list_map_runs(executionArn=ended["executionArn"])["mapRuns"]:
        run_id = run["mapRunArn"].rsplit(":", 1)[1]
        folders |= {f"{prefix}{run_id}/", f"{prefix}/{run_id}/"}
    for folder in folders:
        _delete_under(s3, bucket, folder)


@pytest.fixture
def uploaded(stage: Stage, run_name: str) -> Iterator[tuple[str, dict[str, Any], Refused]]:
    s3 = stage.client("s3")
    bucket = stage.outputs["ImportBucketName"]
    prefix = f"{stage.outputs['ImportPrefix']}{run_name}/"
    files, good, refused = _export(run_name, stage.outputs["StagingBucketName"])
    for name, body in files.items():
        s3.put_object(Bucket=bucket, Key=prefix + name, Body=body)
    try:
        yield prefix, good, refused
    finally:
        _delete_under(s3, bucket, prefix)
        _delete_under(s3, bucket, f"{stage.outputs['ImportResultsPrefix']}{run_name}/")
        _purge(stage.store(), sorted(good))


def test_an_import_stores_the_good_lines_and_reports_the_bad_ones(
    stage: Stage, run_name: str, uploaded: tuple[str, dict[str, Any], Refused]
) -> None:
    prefix, good, refused = uploaded
    s3, bucket = stage.client("s3"), stage.outputs["ImportBucketName"]
    ended = stage.run("ImportStateMachineArn", run_name, {"prefix": prefix, "format": "auto"})
    try:
        assert ended["status"] == "SUCCEEDED", ended.get("cause") or ended.get("error")
        output = json.loads(ended["output"])
        results = _map_results(s3, output)
        assert output["plan"]["files"] == 3
        assert {r["status"] for r in results} == {"SUCCEEDED"}
        totals: dict[str, int] = {}
        for result in results:
            for name, value in result["output"]["counts"].items():
                totals[name] = totals.get(name, 0) + value
        assert totals["stored"] == len(good)
        assert totals["refused"] == len(refused)
        assert totals["failed"] == 0

        store = stage.store()
        for id, record in good.items():
            assert store.get(id).json() == record, id
        reports = _reports(s3, bucket, f"{stage.outputs['ImportResultsPrefix']}{run_name}/reports/")
        found = {(r["file"].rsplit("/", 1)[1], r["line"]): r for r in reports}
        assert set(found) == set(refused)
        assert {where: r["field"] for where, r in found.items()} == refused
        assert {r["outcome"] for r in reports} == {"refused"}
        assert "does not exist" in found[("a.jsonl", 7)]["reason"]
    finally:
        _delete_map_run_results(stage, ended)


# --- reindex -----------------------------------------------------------------------------------


@pytest.fixture
def subscriber(stage: Stage, run_name: str) -> Iterator[str]:
    """An SQS FIFO queue subscribed to the change topic, for this test's ids only (a filter
    policy on the `id` attribute's prefix): its URL."""
    sqs, sns = stage.client("sqs"), stage.client("sns")
    topic = stage.outputs["ChangeTopicArn"]
    url = sqs.create_queue(
        QueueName=f"{run_name}.fifo",
        Attributes={"FifoQueue": "true", "SqsManagedSseEnabled": "true"},
    )["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "sns.amazonaws.com"},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
                "Condition": {"ArnEquals": {"aws:SourceArn": topic}},
            }
        ],
    }
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(policy)})
    subscription = sns.subscribe(
        TopicArn=topic,
        Protocol="sqs",
        Endpoint=queue_arn,
        Attributes={
            "RawMessageDelivery": "true",
            "FilterPolicy": json.dumps({"id": [{"prefix": f"{run_name}-"}]}),
        },
        ReturnSubscriptionArn=True,
    )["SubscriptionArn"]
    try:
        yield url
    finally:
        sns.unsubscribe(SubscriptionArn=subscription)
        sqs.delete_queue(QueueUrl=url)


def test_a_reindex_of_an_id_list_replays_each_current_version_once(
    stage: Stage, run_name: str, subscriber: str
) -> None:
    store = stage.store()
    at = datetime.now(UTC)
    ids = [f"{run_name}-r{n}" for n in range(3)]
    versions = {id: store.put(id, {"n": n}, updated_at=at).version for n, id in enumerate(ids)}
    # Ids that are not in the table (missing, replayed never), long enough that the list is
    # about 130 KB: a Map whose 4 children each echoed the run would outgrow 256 KiB.
    absent = [f"{run_name}-absent-{n:05d}-" + "x" * 60 for n in range(1_200)]
    try:
        ended = stage.run(
            "ReindexStateMachineArn",
            run_name,
            {"ids": [*ids, *absent], "total_segments": 4, "rate": 100},
        )
        assert ended["status"] == "SUCCEEDED", ended.get("cause") or ended.get("error")

        sqs = stage.client("sqs")
        replays: dict[str, list[dict[str, Any]]] = {}

        def every_replay_arrived() -> dict[str, list[dict[str, Any]]] | None:
            received = sqs.receive_message(
                QueueUrl=subscriber, MaxNumberOfMessages=10, WaitTimeSeconds=20
            ).get("Messages", [])
            for message in received:
                notification = json.loads(message["Body"])
                if notification.get("replay"):
                    replays.setdefault(notification["id"], []).append(notification)
                sqs.delete_message(QueueUrl=subscriber, ReceiptHandle=message["ReceiptHandle"])
            return replays if set(replays) >= set(ids) else None

        poll(every_replay_arrived, DELIVERY_DEADLINE_SECONDS, "the replays of the reindex")
        assert set(replays) == set(ids)  # none for the absent ids
        for id in ids:
            (replay,) = replays[id]
            assert replay["version"] == versions[id]
            # The run id is the execution's name, whatever the input says.
            assert replay["replay_run"] == run_name
    finally:
        _purge(store, ids)
