"""The Import state machine, executed: its synthesized definition on moto's Step Functions
interpreter, the import function's real handler in process (vhs_testing.stepfunctions).
Each scenario asserts the store (records read back), the per-line reports, the ResultWriter's
files and the execution's status (error and cause where it fails)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import moto
import pytest
from botocore.exceptions import ClientError

from vhs import VersionedHybridStore, shapes
from vhs.errors import RecordNotFound
from vhs_ops import provisioning
from vhs_testing import stepfunctions as harness
from vhs_testing.backends import atomic_inprocess_dynamodb
from vhs_testing.stepfunctions import REGION, Execution, StateMachines, client, function_session

T0 = "2024-05-01T00:00:00Z"
CHUNK_LINES = shapes.BULK_IMPORT.chunk_lines


def line(id: str, at: str = T0, **record: Any) -> str:
    return json.dumps({"id": id, "updated_at": at, "record": record or {"id": id}})


@dataclass
class Import:
    machines: StateMachines
    store: VersionedHybridStore
    s3: Any
    bucket: str  # the import bucket (the staging bucket: no importBucket in context)
    hooks: list[tuple[str, str]]  # (event, unique id) registered on the functions' session
    after_plan: list[Callable[[dict[str, Any]], None]]

    def put(self, key: str, body: bytes | str) -> None:
        data = body.encode() if isinstance(body, str) else body
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=data)

    def read(self, key: str) -> bytes:
        return self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()

    def run(self, prefix: str, **options: Any) -> Execution:
        return self.machines.run({"prefix": prefix, **options})

    def reports(self, execution: Execution) -> list[dict[str, Any]]:
        """Every per-line report entry of the execution, in key order."""
        prefix = f"{shapes.IMPORT_RESULTS_PREFIX}{execution.name}/reports/"
        listed = self.s3.list_objects_v2(Bucket=self.bucket, Prefix=prefix).get("Contents", [])
        entries = []
        for item in sorted(listed, key=lambda i: i["Key"]):
            entries += [json.loads(x) for x in self.read(item["Key"]).splitlines()]
        return entries

    def result_files(self, execution: Execution) -> dict[str, list[dict[str, Any]]]:
        """The ResultWriter's files: {"SUCCEEDED": [child, ...], "FAILED": [...]}."""
        details = execution_output_or_failure_details(self, execution)
        manifest = json.loads(self.read(details))
        found: dict[str, list[dict[str, Any]]] = {}
        for status, files in manifest["ResultFiles"].items():
            for file in files:
                found.setdefault(status, []).extend(json.loads(self.read(file["Key"])))
        return found

    def stored(self, id: str) -> Any:
        try:
            return json.loads(self.store.get(id).body)
        except RecordNotFound:
            return None

    def fail_writes_of(self, predicate: Callable[[str], bool]) -> None:
        """Every DynamoDB write whose parameters name an id `predicate` accepts is refused
        (AccessDeniedException: not transient, so the worker gives the line up at once)."""

        def refuse(params: dict[str, Any], model: Any, **_: Any) -> None:
            text = json.dumps(params, default=str)
            if model.name in WRITES and any(predicate(word) for word in _ids_in(text)):
                raise ClientError(
                    {"Error": {"Code": "AccessDeniedException", "Message": "injected"}},
                    model.name,
                )

        event, unique_id = "provide-client-params.dynamodb.*", f"refuse-{len(self.hooks)}"
        function_session().register(event, refuse, unique_id=unique_id)
        self.hooks.append((event, unique_id))


WRITES = {"PutItem", "UpdateItem", "TransactWriteItems", "BatchWriteItem"}


def _ids_in(text: str) -> list[str]:
    return [w.strip('"') for w in text.replace("{", " ").replace("}", " ").split() if w]


def execution_output_or_failure_details(run: Import, execution: Execution) -> str:
    """The ResultWriter's manifest key: in the output when the Map succeeded, else found
    under the results prefix (a failed Map Run's results are written too)."""
    if execution.output and "import" in execution.output:
        return execution.output["import"]["ResultWriterDetails"]["Key"]
    listed = run.s3.list_objects_v2(Bucket=run.bucket, Prefix=shapes.IMPORT_RESULTS_PREFIX)
    keys = [i["Key"] for i in listed.get("Contents", []) if i["Key"].endswith("/manifest.json")]
    (key,) = keys
    return key


@pytest.fixture
def bulk() -> Iterator[Import]:
    with (
        moto.mock_aws(config={"stepfunctions": {"execute_state_machine": True}}),
        atomic_inprocess_dynamodb(),
    ):
        machine = harness.machine_of(harness.templates()["import"])
        (function,) = machine.functions.values()
        env = function.environment
        s3 = client("s3")
        provisioning.create_store_resources(
            client("dynamodb"),
            s3,
            table_name=env["VHS_TABLE_NAME"],
            bucket_name=env["VHS_BUCKET_NAME"],
            region=REGION,
        )
        provisioning.create_staging_bucket(s3, env["VHS_STAGING_BUCKET"], REGION)
        from handlers import bulk_import

        bulk_import.ingestor.cache_clear()
        after_plan: list[Callable[[dict[str, Any]], None]] = []

        def handler(event: Any, context: Any) -> Any:
            result = bulk_import.handler(event, context)
            if "plan" in event:
                for step in after_plan:  # what happens between the Plan and the Map
                    step(result)
            return result

        hooks: list[tuple[str, str]] = []
        with harness.installed(machine, {function.handler: handler}) as machines:
            yield Import(
                machines,
                VersionedHybridStore.from_env(),
                s3,
                env["VHS_IMPORT_BUCKET"],
                hooks,
                after_plan,
            )
        session = function_session()
        for event, unique_id in hooks:
            session.unregister(event, unique_id=unique_id)
        bulk_import.ingestor.cache_clear()


def chunk_calls(machines: StateMachines) -> list[Any]:
    return [c for c in machines.invocations if "Items" in c.event]


def test_jsonl_and_csv_with_good_and_bad_lines(bulk: Import) -> None:
    bulk.put(
        "imports/e1/a.jsonl",
        "\n".join([line("j1"), "not json", line("j2", at="yesterday"), line("j3")]) + "\n",
    )
    bulk.put(
        "imports/e1/b.csv",
        f"id,updated_at,title\nc1,{T0},one\nc2,not-a-time,two\nc3,{T0},three\n",
    )

    execution = bulk.run("imports/e1/")

    assert execution.status == "SUCCEEDED", execution.cause
    assert [bulk.stored(i) for i in ("j1", "j3")] == [{"id": "j1"}, {"id": "j3"}]
    assert bulk.stored("c1") == {"title": "one"}  # the columns not mapped to id, updated_at
    assert bulk.stored("c3") is not None
    assert [bulk.stored(i) for i in ("j2", "c2")] == [None, None]
    reports = bulk.reports(execution)
    assert [(r["file"].rsplit("/", 1)[1], r["line"], r["outcome"]) for r in reports] == [
        ("a.jsonl", 2, "refused"),
        ("a.jsonl", 3, "refused"),
        ("b.csv", 3, "refused"),
    ]
    assert reports[1]["field"] == "updated_at" and reports[2]["field"] == "updated_at"
    results = bulk.result_files(execution)
    assert set(results) == {"SUCCEEDED"}
    outputs = [json.loads(child["Output"]) for child in results["SUCCEEDED"]]
    assert sum(o["counts"]["stored"] for o in outputs) == 4
    assert sum(o["counts"]["refused"] for o in outputs) == 3
    assert len(outputs) == execution.output["plan"]["chunks"] == 2
    assert bulk.machines.waits == []


def test_a_chunk_that_always_fails_fails_the_map_run_after_its_retries(bulk: Import) -> None:
    bulk.put("imports/e2/a.jsonl", "\n".join(line(f"ok{n}") for n in range(3)) + "\n")
    bulk.put("imports/e2/b.jsonl", "\n".join([line("doomed"), line("fine")]) + "\n")
    bulk.fail_writes_of(lambda word: word == "doomed")

    execution = bulk.run("imports/e2/")

    # ToleratedFailurePercentage 0 (shapes.BULK_IMPORT): one failed chunk fails the run.
    assert (execution.status, execution.error) == (
        "FAILED",
        "States.ExceedToleratedFailureThreshold",
    )
    assert [bulk.stored(f"ok{n}") for n in range(3)] == [{"id": f"ok{n}"} for n in range(3)]
    assert bulk.stored("fine") == {"id": "fine"} and bulk.stored("doomed") is None
    # ImportIncomplete: the first try and two retries, 30 s then 120 s later.
    doomed = [c for c in chunk_calls(bulk.machines) if "b.jsonl" in c.event["Items"][0]["key"]]
    assert [c.error_type for c in doomed] == ["ImportIncomplete"] * 3
    assert bulk.machines.waits == [30, 120]
    results = bulk.result_files(execution)
    (failed,) = results["FAILED"]
    assert failed["Error"] == "ImportIncomplete"
    assert "1 lines failed" in json.loads(failed["Cause"])["errorMessage"]
    assert len(results["SUCCEEDED"]) == 1
    (entry,) = bulk.reports(execution)
    assert (entry["file"].rsplit("/", 1)[1], entry["line"], entry["outcome"]) == (
        "b.jsonl",
        1,
        "failed",
    )
    assert "AccessDeniedException" in entry["reason"]


def test_a_chunk_that_fails_once_reports_its_final_outcome(bulk: Import) -> None:
    bulk.put("imports/e3/a.jsonl", "\n".join([line("flaky"), line("steady")]) + "\n")
    bulk.fail_writes_of(lambda word: word == "flaky" and len(chunk_calls(bulk.machines)) < 2)

    execution = bulk.run("imports/e3/")

    assert execution.status == "SUCCEEDED", execution.cause
    assert bulk.stored("flaky") == {"id": "flaky"} and bulk.stored("steady") == {"id": "steady"}
    assert [c.error_type for c in chunk_calls(bulk.machines)] == ["ImportIncomplete", None]
    assert bulk.machines.waits == [30]
    assert bulk.reports(execution) == []  # no stale "failed" line survives the retry
    (child,) = bulk.result_files(execution)["SUCCEEDED"]
    assert json.loads(child["Output"])["reports"] == []


def test_a_prefix_outside_the_import_prefix_fails_at_the_plan_without_a_retry(
    bulk: Import,
) -> None:
    bulk.put("incoming/x.jsonl", line("x") + "\n")

    execution = bulk.run("incoming/")

    assert (execution.status, execution.error) == ("FAILED", "InvalidInput")
    assert json.loads(execution.cause or "{}")["errorMessage"].startswith("prefix: ")
    assert len(bulk.machines.invocations) == 1 and bulk.machines.waits == []
    assert bulk.stored("x") is None


def test_a_csv_mapping_naming_a_missing_column_fails_before_any_line(bulk: Import) -> None:
    bulk.put("imports/e4/a.csv", f"id,updated_at,title\nc1,{T0},one\n")
    bulk.put("imports/e4/b.jsonl", line("j1") + "\n")

    execution = bulk.run("imports/e4/", mapping={"id": "identifier"})

    assert (execution.status, execution.error) == ("FAILED", "InvalidInput")
    assert "identifier" in json.loads(execution.cause or "{}")["errorMessage"]
    assert chunk_calls(bulk.machines) == [] and bulk.machines.waits == []
    assert bulk.stored("c1") is None and bulk.stored("j1") is None


def test_an_empty_file_is_no_chunk_and_the_others_are_imported(bulk: Import) -> None:
    bulk.put("imports/e5/empty.jsonl", b"")
    bulk.put("imports/e5/a.jsonl", line("a1") + "\n")

    execution = bulk.run("imports/e5/")

    assert execution.status == "SUCCEEDED", execution.cause
    assert bulk.stored("a1") == {"id": "a1"}
    assert execution.output["plan"]["chunks"] == 1
    assert bulk.reports(execution) == []


def test_an_export_replaced_between_plan_and_map_fails_its_chunks_without_retries(
    bulk: Import,
) -> None:
    bulk.put("imports/e6/a.jsonl", "\n".join(line(f"v1-{n}") for n in range(3)) + "\n")
    bulk.after_plan.append(
        lambda plan: bulk.put(
            "imports/e6/a.jsonl", "\n".join(line(f"v2-{n}", x="y" * 9) for n in range(3)) + "\n"
        )
    )

    execution = bulk.run("imports/e6/")

    assert (execution.status, execution.error) == (
        "FAILED",
        "States.ExceedToleratedFailureThreshold",
    )
    assert [c.error_type for c in chunk_calls(bulk.machines)] == ["ExportChanged"]
    assert bulk.machines.waits == []
    assert all(bulk.stored(f"v{v}-{n}") is None for v in (1, 2) for n in range(3))
    (failed,) = bulk.result_files(execution)["FAILED"]
    assert failed["Error"] == "ExportChanged"


def test_a_manifest_item_naming_a_key_outside_the_prefix_is_refused_without_retries(
    bulk: Import,
) -> None:
    bulk.put("imports/e7/a.jsonl", line("a1") + "\n")
    bulk.put("incoming/secret.jsonl", line("secret") + "\n")

    def point_at_secret(plan: dict[str, Any]) -> None:
        items = [json.loads(x) for x in bulk.read(plan["manifest_key"]).splitlines()]
        items = [{**item, "key": "incoming/secret.jsonl"} for item in items]
        bulk.put(plan["manifest_key"], "".join(json.dumps(i) + "\n" for i in items))

    bulk.after_plan.append(point_at_secret)

    execution = bulk.run("imports/e7/")

    assert execution.status == "FAILED"
    assert [c.error_type for c in chunk_calls(bulk.machines)] == ["InvalidInput"]
    assert bulk.machines.waits == []
    assert bulk.stored("secret") is None


def test_permanent_errors_come_first_and_are_never_retried() -> None:
    definition = harness.machine_of(harness.templates()["import"]).definition
    plan = definition["States"]["Plan"]
    chunk = definition["States"]["Import"]["ItemProcessor"]["States"]["ImportChunks"]
    for task in (plan, chunk):
        permanent = [r for r in task["Retry"] if "InvalidInput" in r["ErrorEquals"]]
        assert len(permanent) == 1 and permanent[0]["MaxAttempts"] == 0
        assert "ImportIncomplete" not in permanent[0]["ErrorEquals"]
    assert "ExportChanged" in chunk["Retry"][1]["ErrorEquals"]
    assert [r["ErrorEquals"] for r in chunk["Retry"]][-1] == ["ImportIncomplete"]
    assert definition["States"]["Import"]["ItemProcessor"]["ProcessorConfig"] == {
        "Mode": "DISTRIBUTED",
        "ExecutionType": "STANDARD",
    }
