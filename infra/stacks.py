"""The VHS stacks: Store (stateful), Ingest, Changes, Maintenance, ReadApi and Import (stateless).

* ``Vhs-<stage>-Store`` (stateful): the body bucket, the index table, the staging bucket and
  the access-log bucket. Everything in it is RETAIN, so deleting the stack keeps the data.
* ``Vhs-<stage>-Ingest`` (stateless): the queues, the function, its event source, and the
  monitoring of all of it (alarm topic, alarms, dashboard). Delete and redeploy it freely.
* ``Vhs-<stage>-Changes`` (stateless): the change feed (infra/changes.py): the function on
  the table's stream, its SNS FIFO topic and dead-letter queue, and its alarms, which go to
  the Ingest stack's alarm topic. It can be deployed, paused or removed without touching
  ingest; while it is gone the stream keeps 24 hours of changes for it.
* ``Vhs-<stage>-Maintenance`` (stateless): the garbage collector (infra/gc.py): its function,
  the EventBridge rule that runs it on a schedule, and its alarm, which goes to the Ingest
  stack's alarm topic. A stack of its own rather than a part of Ingest or Changes: the
  collector shares no resource with either (it names the Store's bucket and table, as they
  do), it can be paused or removed without touching the pipeline, and the Ingest and Changes
  templates stay exactly as they are.
* ``Vhs-<stage>-Import`` (stateless): bulk import (infra/bulk_import.py): the state machine
  whose Distributed Map imports an export's files, its function and its alarms, which go to
  the Ingest stack's alarm topic. A stack of its own: it is used for a catalogue's first load
  and can be removed afterwards without touching anything else.
* ``Vhs-<stage>-ReadApi`` (stateless): the read API (infra/read_api.py): its function, the
  function URL (IAM auth), the managed policy consumers attach, and its alarms, which go to
  the Ingest stack's alarm topic. A stack of its own for the reasons the collector has one:
  it shares no resource with the others, and it can be added or removed alone.
* ``Vhs-<stage>-Reindex`` (stateless): the reindex state machine and its worker function
  (infra/reindex.py), which replay every current record to the change feed on demand, and
  their alarm. A stack of its own: it is run by hand, reads the Store's table and publishes
  to the Changes stack's topic (both through SSM), and can be removed without touching either.

How the stacks hand each other values (SSM parameters, never cross-stack exports) and what
every stack shares is stack_base.py's.

Ingest's monitoring lives in the Ingest stack rather than a stack of its own because every
alarm and widget names a queue or the function: they deploy, change and go away together. The
change feed's alarms live in its stack for the same reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
from cdk_nag import AwsSolutionsChecks

from vhs import settings, shapes

from . import sam
from .bulk_import import BulkImport
from .changes import ChangeFeed
from .config import VhsConfig
from .gc import GarbageCollection
from .ingest import Ingest
from .monitoring import Monitoring
from .read_api import ReadApi
from .reindex import Reindex
from .stack_base import (
    StoreReaderStack,
    VhsStack,
    alarm_topic,
    bucket_name,
    outputs,
    parameters,
    resolved,
    store_settings,
)
from .store import Store


class StoreStack(VhsStack):
    holds = "stateful resources (body bucket, index table)"

    def _add(self, config: VhsConfig) -> None:
        self.store = Store(
            self,
            "Store",
            table_name=config.table_name,
            bucket_name=bucket_name(config, "bodies"),
            staging_bucket_name=bucket_name(config, "staging"),
            access_log_bucket_name=bucket_name(config, "logs"),
        )
        store = self.store
        stream_arn = store.table.table_stream_arn or ""
        outputs(
            self,
            ("TableName", store.table.table_name, f"the index table ({settings.TABLE_NAME})"),
            ("TableArn", store.table.table_arn, "the index table's ARN"),
            ("TableStreamArn", stream_arn, "the change stream"),
            ("BucketName", store.bucket.bucket_name, f"the body bucket ({settings.BUCKET_NAME})"),
            (
                "BodyPrefix",
                config.body_prefix or "(none)",
                f"the body key prefix ({settings.PREFIX})",
            ),
            ("StagingBucketName", store.staging.bucket_name, "where producers stage payloads"),
            ("AccessLogBucketName", store.access_logs.bucket_name, "S3 server access logs"),
        )
        parameters(
            self,
            config,
            ("table-name", store.table.table_name, settings.TABLE_NAME),
            ("bucket-name", store.bucket.bucket_name, settings.BUCKET_NAME),
            ("body-prefix", config.body_prefix or "/", settings.PREFIX),
            ("table-stream-arn", stream_arn, "the table's stream (the change feed reads it)"),
        )


class IngestStack(StoreReaderStack):
    holds = "ingest queue, function and monitoring (stateless)"

    def _add(self, config: VhsConfig) -> None:
        staging = s3.Bucket.from_bucket_name(self, "Staging", bucket_name(config, "staging"))
        self.ingest = Ingest(self, "Ingest", staging=staging, **self.wiring(alarms=False))
        ingest = self.ingest
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            config=config,
            queue=ingest.queue,
            dead_letters=ingest.dead_letters,
            function=ingest.function,
            table=self.records,
        )
        topic_arn = self.monitoring.topic.topic_arn
        policy_arn = ingest.producer_policy.managed_policy_arn
        outputs(
            self,
            ("QueueUrl", ingest.queue.queue_url, "producers send records here"),
            ("QueueArn", ingest.queue.queue_arn, "the ingest queue's ARN"),
            ("DeadLetterQueueUrl", ingest.dead_letters.queue_url, "records that failed"),
            ("AlarmTopicArn", topic_arn, "alarm and OK notifications"),
            ("ProducerPolicyArn", policy_arn, "attach to producers"),
            ("FunctionName", ingest.function.function_name, "the ingest function"),
            ("DashboardName", self.monitoring.dashboard.dashboard_name, "CloudWatch dashboard"),
        )
        parameters(
            self,
            config,
            ("queue-url", ingest.queue.queue_url, "the ingest queue URL"),
            ("staging-bucket", staging.bucket_name, "staging bucket"),
            ("producer-policy-arn", policy_arn, "managed policy for producers"),
            (
                "alarm-topic-arn",
                topic_arn,
                "the alarm topic (the change feed's alarms notify it too)",
            ),
        )


class ChangesStack(VhsStack):
    holds = "change feed (table stream to SNS; stateless)"

    def _add(self, config: VhsConfig) -> None:
        bucket = s3.Bucket.from_bucket_name(self, "Bodies", bucket_name(config, "bodies"))
        topic = alarm_topic(self, config)
        self.changes = ChangeFeed(
            self,
            "ChangeFeed",
            config=config,
            bucket=bucket,
            table_stream_arn=resolved(self, config, "table-stream-arn"),
            alarm_topic=topic,
        )
        changes = self.changes
        outputs(
            self,
            ("ChangeTopicArn", changes.topic.topic_arn, "subscribe here: one message per version"),
            ("ChangeDeadLetterQueueUrl", changes.dead_letters.queue_url, "stream ranges given up"),
            ("ChangeFunctionName", changes.function.function_name, "the change feed function"),
        )
        parameters(
            self,
            config,
            ("change-topic-arn", changes.topic.topic_arn, "the change feed topic"),
            (
                "change-topic-key-arn",
                changes.topic_key.key_arn,
                "the change feed topic's KMS key (the reindex worker publishes with it)",
            ),
        )


class MaintenanceStack(StoreReaderStack):
    holds = "scheduled garbage collection (stateless)"

    def _add(self, config: VhsConfig) -> None:
        self.gc = GarbageCollection(self, "GarbageCollection", **self.wiring())
        outputs(
            self,
            ("GcFunctionName", self.gc.function.function_name, "the garbage collector"),
            ("GcRuleName", self.gc.rule.rule_name, "its schedule (disable it to pause GC)"),
        )


class ReadApiStack(StoreReaderStack):
    holds = "read API (function URL with IAM auth; stateless)"

    def _add(self, config: VhsConfig) -> None:
        self.read_api = ReadApi(self, "ReadApi", **self.wiring())
        api = self.read_api
        policy_arn = api.reader_policy.managed_policy_arn
        outputs(
            self,
            ("ReadApiUrl", api.url.url, "GET /records/{id}: SigV4-signed, service lambda"),
            ("ReaderPolicyArn", policy_arn, "attach to consumers of the read API"),
            ("ReadApiFunctionName", api.function.function_name, "the read API function"),
        )
        parameters(
            self,
            config,
            ("read-api-url", api.url.url, "the read API's URL"),
            ("reader-policy-arn", policy_arn, "managed policy for read API consumers"),
        )


class ReindexStack(StoreReaderStack):
    holds = "reindex: replays of current records to the change feed (stateless)"

    def _add(self, config: VhsConfig) -> None:
        self.reindex = Reindex(
            self,
            "Reindex",
            # The Changes stack's topic and its key, through SSM, as the alarm topic.
            topic_arn=resolved(self, config, "change-topic-arn"),
            topic_key_arn=resolved(self, config, "change-topic-key-arn"),
            **self.wiring(),
        )
        machine = self.reindex.state_machine
        outputs(
            self,
            ("ReindexStateMachineArn", machine.state_machine_arn, "start a reindex here"),
            ("ReindexFunctionName", self.reindex.function.function_name, "the reindex worker"),
        )


class ImportStack(StoreReaderStack):
    holds = "bulk import (Step Functions Distributed Map; stateless)"

    def _add(self, config: VhsConfig) -> None:
        staging = s3.Bucket.from_bucket_name(self, "Staging", bucket_name(config, "staging"))
        imports = (
            s3.Bucket.from_bucket_name(self, "Imports", config.import_bucket)
            if config.import_bucket
            else staging
        )
        self.bulk_import = BulkImport(
            self, "BulkImport", staging=staging, imports=imports, **self.wiring()
        )
        machine = self.bulk_import.state_machine
        outputs(
            self,
            ("ImportStateMachineArn", machine.state_machine_arn, "start an import here"),
            ("ImportBucketName", imports.bucket_name, "upload export files here"),
            ("ImportPrefix", shapes.IMPORT_PREFIX, "under this prefix"),
            ("ImportResultsPrefix", shapes.IMPORT_RESULTS_PREFIX, "results and reports"),
            ("ImportFunctionName", self.bulk_import.function.function_name, "the worker"),
        )


@dataclass(frozen=True)
class VhsStacks:
    config: VhsConfig
    store: StoreStack
    ingest: IngestStack
    changes: ChangesStack
    maintenance: MaintenanceStack
    read_api: ReadApiStack
    reindex: ReindexStack
    bulk_import: ImportStack


def build(
    app: cdk.App,
    config: VhsConfig | None = None,
    *,
    bootstrap_version_rule: bool = True,
    nag: bool = True,
) -> VhsStacks:
    """Add a VHS deployment to ``app``: the stacks, their tags and the cdk-nag checks.

    ``config`` defaults to the app's context. ``bootstrap_version_rule=False`` is for tests:
    moto's CloudFormation has no bootstrap stack to check. ``nag=False`` skips cdk-nag.
    """
    config = config or VhsConfig.from_context(app.node.try_get_context)
    # One StoreSettings for every function that opens the store and judges versions.
    store = store_settings(config)

    def synth() -> cdk.IStackSynthesizer | None:
        # One synthesizer per stack: a synthesizer binds to the stack it is given to.
        if bootstrap_version_rule:
            return None
        return cdk.DefaultStackSynthesizer(generate_bootstrap_version_rule=False)

    def name(stack: str) -> str:
        return f"{config.prefix}-{stack}"

    store_stack = StoreStack(app, name("Store"), config=config, synthesizer=synth())
    ingest = IngestStack(app, name("Ingest"), config=config, store=store, synthesizer=synth())
    ingest.add_stack_dependency(
        store_stack, "the function reads and writes the Store's bucket and table"
    )
    changes = ChangesStack(app, name("Changes"), config=config, synthesizer=synth())
    changes.add_stack_dependency(store_stack, "the change feed reads the table's stream (SSM)")
    changes.add_stack_dependency(ingest, "the change feed's alarms notify the alarm topic (SSM)")
    maintenance = MaintenanceStack(
        app, name("Maintenance"), config=config, store=store, synthesizer=synth()
    )
    maintenance.add_stack_dependency(
        store_stack, "the collector reads the Store's bucket and table"
    )
    maintenance.add_stack_dependency(ingest, "the collector's alarm notifies the alarm topic (SSM)")
    read_api = ReadApiStack(app, name("ReadApi"), config=config, store=store, synthesizer=synth())
    read_api.add_stack_dependency(store_stack, "the API reads the Store's bucket and table")
    read_api.add_stack_dependency(ingest, "the API's alarms notify the alarm topic (SSM)")
    reindex = ReindexStack(app, name("Reindex"), config=config, store=store, synthesizer=synth())
    reindex.add_stack_dependency(store_stack, "the worker scans the Store's table")
    reindex.add_stack_dependency(ingest, "the reindex alarm notifies the alarm topic (SSM)")
    reindex.add_stack_dependency(changes, "the worker publishes to the change topic (SSM)")
    bulk_import = ImportStack(app, name("Import"), config=config, store=store, synthesizer=synth())
    bulk_import.add_stack_dependency(store_stack, "the import writes the Store's bucket and table")
    bulk_import.add_stack_dependency(ingest, "the import's alarms notify the alarm topic (SSM)")
    for each in (store_stack, ingest, changes, maintenance, read_api, reindex, bulk_import):
        if config.sam_local:
            sam.prepare(each)
        cdk.Tags.of(each).add("project", "vhs")
        cdk.Tags.of(each).add("stage", config.stage)
    if nag:
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return VhsStacks(
        config, store_stack, ingest, changes, maintenance, read_api, reindex, bulk_import
    )
