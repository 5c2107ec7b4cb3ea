"""Bulk import in AWS: a Step Functions state machine whose Distributed Map imports an export's
files in parallel through the store (docs/import.md).

Start an execution with ``{"prefix": "imports/<export>/", "format": "auto"|"jsonl"|"csv",
"mapping": {"id": ..., ...}}`` ("format" and "mapping" may be left out). Two states:

1. **Plan** (the import function): list the prefix (only .jsonl, .ndjson and .csv files),
   read each file once and cut it into chunks of whole lines (`BulkImportShape.chunk_lines`),
   each a byte range with the number of its first line; write them as a JSON Lines manifest.
2. **Import** (a DISTRIBUTED Map): its ItemReader reads the manifest (JSONL), its
   ItemBatcher hands `max_items_per_batch` chunks to each child, at most `max_concurrency`
   children run at once (STANDARD children: a chunk's work, up to the function's 900 s, and
   its retries do not fit an EXPRESS child's 5 minutes), and each child's Task invokes the
   import function, which writes the
   chunk through the store and its per-line report to S3. The ResultWriter writes every
   child's result (counts and report locations) under the results prefix. A chunk whose
   lines failed fails its child; `tolerated_failure_percentage` (0: none) decides whether
   the Map Run fails, and a redrive of the execution runs only the unsuccessful chunks. Bad
   input, configuration and a replaced export (`PERMANENT_ERRORS`) are never retried.

Why a plan step, rather than the ItemReader on the export itself: Step Functions' JSONL and
CSV readers parse each line themselves, so a line that is not JSON fails the whole Map Run
instead of being reported, a line's number is not handed to the worker, and a line is
re-serialised before the contract sees it (duplicate keys and number precision, which the
contract judges, are lost). The manifest keeps the contract's judgement of the raw bytes and
the file's own line numbers, and costs one extra read of each file.

Where the files live: `config.import_bucket` (context ``importBucket``) or, by default, the
Store's staging bucket, under `shapes.IMPORT_PREFIX`, with results under
`shapes.IMPORT_RESULTS_PREFIX`. The staging bucket expires every object after
`shapes.STAGING_EXPIRATION_DAYS` days, so an import must finish (and be redriven) within
that, and its results must be copied elsewhere to be kept longer: docs/import.md.

The function's role is written out statement by statement: list and read under the import
prefix, write under the results prefix, and the store's writes as the ingest function has
them (bodies, the index, staged payloads). The state machine's role is what Distributed Map
needs: invoke the function, read the manifest and write results under the results prefix,
and start, describe and stop its own child executions.
"""

from __future__ import annotations

from typing import Unpack

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from vhs import settings, shapes

from . import nag
from .config import VhsConfig
from .feature import StoreFeature, StoreWiring
from .function import allow, allow_listing, log_group
from .ingest import store_writer_statements
from .machine import plan_task, worker_task
from .monitoring import Alarms
from .store import acknowledge_dictionary_reads, object_arn

# What a state machine with logging to CloudWatch Logs and X-Ray tracing needs: the log
# delivery actions and X-Ray's support no resource-level permissions (AWS requires "*").
LOG_DELIVERY_ACTIONS = (
    "logs:CreateLogDelivery",
    "logs:GetLogDelivery",
    "logs:UpdateLogDelivery",
    "logs:DeleteLogDelivery",
    "logs:ListLogDeliveries",
    "logs:PutResourcePolicy",
    "logs:DescribeResourcePolicies",
    "logs:DescribeLogGroups",
)
TRACING_ACTIONS = (
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "xray:GetSamplingRules",
    "xray:GetSamplingTargets",
)


class BulkImport(StoreFeature):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        staging: s3.IBucket,
        imports: s3.IBucket | None = None,
        **wiring: Unpack[StoreWiring],
    ) -> None:
        """`imports`: the bucket import files are read from and results written to; by
        default `staging`. The function writes through the store as ingest does
        (`StoreWiring`)."""
        super().__init__(scope, id, **wiring)
        config, body_objects = self.config, self.body_objects
        shape = config.bulk_import
        imports = imports or staging
        stack = cdk.Stack.of(self)
        # A fixed name: the role's statements on its own executions are built from it (a
        # reference from the role to the state machine that uses it would be a cycle).
        name = config.physical_name("import")

        staged_objects = object_arn(staging, shapes.STAGING_PREFIX)
        import_objects = object_arn(imports, shapes.IMPORT_PREFIX)
        result_objects = object_arn(imports, shapes.IMPORT_RESULTS_PREFIX)
        report_objects = imports.arn_for_objects(f"{shapes.IMPORT_RESULTS_PREFIX}*/reports/*")
        self.add_function(
            settings.BULK_IMPORT_FUNCTION,
            does="plans and imports chunks of bulk import files",
            role="bulk import: read imports, write the store",
            statements=[
                # ListObjectsV2 of the import prefix (the plan), and 404 rather than 403 for
                # a file gone since.
                allow_listing("ListImportFiles", imports, shapes.IMPORT_PREFIX),
                allow("ReadImportFiles", ["s3:GetObject"], [import_objects]),
                # The manifest and the per-line reports; never under the import prefix.
                allow("WriteResults", ["s3:PutObject"], [result_objects]),
                # A chunk that ends with every line in deletes the report an earlier attempt
                # left (its failed lines were stored on the retry): reports describe the final
                # outcome. Reports only, never the manifest or the ResultWriter's files.
                allow("ReplaceReports", ["s3:DeleteObject"], [report_objects]),
                # The store's writes, as the ingest function has them.
                *store_writer_statements(
                    body_objects, self.dictionary_objects, staging, self.table, staged_objects
                ),
            ],
            environment=settings.bulk_import_environment(
                self.store,
                bucket=imports.bucket_name,
                prefix=shapes.IMPORT_PREFIX,
                results_prefix=shapes.IMPORT_RESULTS_PREFIX,
                staging_bucket=staging.bucket_name,
                staging_prefix=shapes.STAGING_PREFIX,
                write_workers=shape.write_workers,
                chunk_lines=shape.chunk_lines,
            ),
            shape=shape,
            no_dlq_reason=(
                "The function is invoked synchronously by Step Functions: a failed chunk "
                "fails its child execution, which the Map Run records and a redrive of the "
                "execution runs again; there is no asynchronous event to keep."
            ),
        )

        self.machine_role = self._machine_role(stack, name, result_objects)
        self.state_machine = self._state_machine(config, shape, imports, name)
        self._acknowledge(
            body_objects, staged_objects, import_objects, result_objects, report_objects
        )

        self.add_alarms(self._alarms)

    def _machine_role(self, stack: cdk.Stack, name: str, result_objects: str) -> iam.Role:
        """The state machine's role, statement by statement. The state machine is handed an
        immutable reference to it, so the grants CDK would add (every object of the bucket
        for the reader and writer, the function's every version) are not added."""

        def states_arn(resource: str, resource_name: str) -> str:
            return stack.format_arn(
                service="states",
                resource=resource,
                resource_name=resource_name,
                arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
            )

        self.execution_arns = (states_arn("execution", f"{name}:*"),)
        self.map_run_arn = states_arn("execution", f"{name}/Import:*")
        role = iam.Role(
            self,
            "MachineRole",
            assumed_by=iam.ServicePrincipal("states.amazonaws.com"),
            description=f"VHS {name}: run the bulk import's plan and Distributed Map",
        )
        for statement in (
            allow("InvokeImportFunction", ["lambda:InvokeFunction"], [self.function.function_arn]),
            # The ItemReader reads the plan's manifest; the ResultWriter writes the results.
            # Both under the results prefix: the state machine never reads the export.
            allow(
                "ReadManifestWriteResults",
                [
                    "s3:GetObject",
                    "s3:PutObject",
                    "s3:ListMultipartUploadParts",
                    "s3:AbortMultipartUpload",
                ],
                [result_objects],
            ),
            # Distributed Map runs its children as executions of this state machine.
            allow(
                "StartChildExecutions",
                ["states:StartExecution"],
                [states_arn("stateMachine", name)],
            ),
            allow(
                "DescribeAndStopChildExecutions",
                ["states:DescribeExecution", "states:StopExecution"],
                list(self.execution_arns),
            ),
            # A redrive of the execution redrives the Map Run's unsuccessful children.
            allow("RedriveMapRun", ["states:RedriveExecution"], [self.map_run_arn]),
            allow("DeliverExecutionLogs", list(LOG_DELIVERY_ACTIONS), ["*"]),
            allow("TraceExecutions", list(TRACING_ACTIONS), ["*"]),
        ):
            role.add_to_principal_policy(statement)
        return role

    def _state_machine(
        self,
        config: VhsConfig,
        shape: shapes.BulkImportShape,
        imports: s3.IBucket,
        name: str,
    ) -> sfn.StateMachine:
        plan = plan_task(self, self.function, result_path="$.plan")
        # A bad item or a replaced export (the chunk worker's ExportChanged: S3 answered 412 to
        # its IfMatch on the ETag the plan recorded) fails its chunk at once, before
        # ImportIncomplete's Retrier: trying again cannot fix it.
        chunk = worker_task(self, "ImportChunks", self.function)
        # Failed lines (throttling that outlasted the worker's own retries): twice more,
        # later, before the child fails.
        chunk.add_retry(
            errors=["ImportIncomplete"],
            interval=cdk.Duration.seconds(30),
            backoff_rate=4,
            max_attempts=2,
        )
        import_map = sfn.DistributedMap(
            self,
            "Import",
            item_reader=sfn.S3JsonLItemReader(
                bucket=imports, key=sfn.JsonPath.string_at("$.plan.manifest_key")
            ),
            item_batcher=sfn.ItemBatcher(
                max_items_per_batch=shape.max_items_per_batch,
                # Every child is told the execution (where its reports go) and the mapping.
                batch_input={
                    "execution.$": "$$.Execution.Name",
                    "mapping.$": "$.plan.mapping",
                },
            ),
            max_concurrency=shape.max_concurrency,
            tolerated_failure_percentage=shape.tolerated_failure_percentage,
            result_writer_v2=sfn.ResultWriterV2(
                bucket=imports, prefix=shapes.IMPORT_RESULTS_PREFIX
            ),
            # STANDARD children: a chunk may take the function's whole timeout (900 s) and its
            # ImportIncomplete retries wait 30 s + 120 s more, past an EXPRESS child's 5
            # minutes (docs/import.md, "AWS limits").
            map_execution_type=sfn.StateMachineType.STANDARD,
            label="Import",
            result_path="$.import",
        )
        import_map.item_processor(chunk)
        execution_logs = log_group(self, "ExecutionLogs", config)
        machine = sfn.StateMachine(
            self,
            "StateMachine",
            state_machine_name=name,
            role=iam.Role.from_role_arn(
                self, "MachineRoleReference", self.machine_role.role_arn, mutable=False
            ),
            comment=f"VHS {config.stage}: bulk import of an export's files (docs/import.md)",
            definition_body=sfn.DefinitionBody.from_chainable(plan.next(import_map)),
            state_machine_type=sfn.StateMachineType.STANDARD,
            timeout=cdk.Duration.hours(shape.execution_timeout_hours),
            tracing_enabled=True,
            logs=sfn.LogOptions(
                destination=execution_logs,
                level=sfn.LogLevel.ALL,
                # Lines are catalogue records: their data stays out of the logs.
                include_execution_data=False,
            ),
        )
        # Its role's policy must exist before it runs (CDK cannot see it: the role is given
        # by reference).
        policy = self.machine_role.node.find_child("DefaultPolicy")
        machine.node.add_dependency(policy)
        # The policy CDK builds for a Distributed Map's children would attach to the role it
        # was given, which is immutable: it is attached to nothing and never deployed. Its
        # statements are MachineRole's (StartChildExecutions and the two after it).
        machine.node.try_remove_child("DistributedMapPolicy")
        return machine

    def _acknowledge(
        self,
        body_objects: str,
        staged_objects: str,
        import_objects: str,
        result_objects: str,
        report_objects: str,
    ) -> None:
        role = self.role
        nag.acknowledge_wildcard(
            role,
            body_objects,
            "Object-level access under the store's body prefix only, as the ingest function "
            "has it: body keys are content-addressed ({prefix}/{shard}/{id}/{sha256}) and "
            "cannot be named in advance. PutObject and AbortMultipartUpload; no read, no delete.",
        )
        acknowledge_dictionary_reads(role, self.dictionary_objects)
        nag.acknowledge_wildcard(
            role,
            staged_objects,
            "GetObject under the producers' prefix of the staging bucket (incoming/), as the "
            "ingest function has it: a line may point at a staged body or be a claim check, "
            "whose keys the producer chose.",
        )
        nag.acknowledge_wildcard(
            role,
            import_objects,
            "GetObject under the import prefix only: the files of an export are named by "
            "whoever uploads them, and the plan finds them by listing that prefix.",
        )
        nag.acknowledge_wildcard(
            role,
            result_objects,
            "PutObject under the import results prefix only: each execution writes its "
            "manifest and one report per chunk with refused lines, named by the execution "
            "and the file, which are known only when it runs.",
        )
        nag.acknowledge_wildcard(
            role,
            report_objects,
            "DeleteObject of per-chunk reports only (import-results/<execution>/reports/...): "
            "a chunk whose retry stored every line removes the report its failed attempt "
            "wrote, named by the execution and the file, known only when it runs.",
        )
        machine = self.machine_role
        nag.acknowledge_wildcard(
            machine,
            result_objects,
            "The Distributed Map's ItemReader reads the plan's manifest and its ResultWriter "
            "writes the children's results, both under the import results prefix only, under "
            "keys named by the execution and the Map Run, known only when they run.",
        )
        for arn in self.execution_arns:
            nag.acknowledge_wildcard(
                machine,
                arn,
                "Distributed Map describes and stops the child executions of this state "
                "machine's own Map Runs, whose names Step Functions makes when a Map Run starts.",
            )
        nag.acknowledge_wildcard(
            machine,
            self.map_run_arn,
            "A redrive of an import redrives its Map Run's unsuccessful children: executions "
            "of this state machine's Import Map Run, named by Step Functions.",
        )
        nag.acknowledge(
            machine,
            "AwsSolutions-IAM5",
            "Logging to CloudWatch Logs (log delivery) and X-Ray tracing of a state machine "
            "take actions that support no resource-level permissions: AWS requires '*'.",
            finding="Resource::*",
        )

    def _alarms(self, alarms: Alarms) -> list[cloudwatch.Alarm]:
        period = cdk.Duration.seconds(self.config.alarms.period_seconds)
        machine = self.state_machine
        return [
            alarms.alarm(
                "ImportExecutionsFailed",
                machine.metric_failed(period=period, statistic="Sum"),
                "A bulk import execution failed: chunks with failed lines (see its results "
                "prefix), or a plan refused (a bad mapping or prefix); redrive it once the "
                "cause is fixed; see docs/runbook.md (bulk import failed).",
                threshold=1,
            ),
            alarms.alarm(
                "ImportExecutionsTimedOut",
                machine.metric_timed_out(period=period, statistic="Sum"),
                "A bulk import execution timed out: redrive it (stored lines are answered "
                "unchanged); see docs/runbook.md (bulk import failed).",
                threshold=1,
            ),
            alarms.function_errors(
                "ImportErrors",
                self.function,
                "The bulk import function failed (a chunk with failed lines, a timeout, a "
                "refused plan); its execution retries or fails; see docs/runbook.md (bulk "
                "import failed).",
            ),
        ]
