"""Garbage collection in AWS: the collector as a Lambda, run on a schedule by EventBridge.

The function runs `handlers.gc` (docs/gc.md) with the settings of `vhs.shapes.GC`
(overridable through VhsConfig): an EventBridge rule invokes it on the schedule with
``{"parallel": N}``, it fans the 256 shards out over N asynchronous invocations of itself,
and an invocation that runs short of time hands the shards it has not reached to a fresh
invocation of itself. It is a `VhsFunction` (infra/function.py), packaged like the ingest
function, with a role of its own, written out statement by statement: list the body prefix,
read object metadata and delete objects under it, read and mark the index table's items,
invoke itself, write its own logs. No Scan, no PutObject, no DeleteObjectVersion, no
wildcard actions.

The function has a fixed name (`gc_function_name`), so its role can name the function's ARN
without referring to the function: a reference from the role's policy to the function it
belongs to would be a cycle (the function depends on its role).
"""

from __future__ import annotations

import dataclasses
from typing import Unpack

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from constructs import Construct

from vhs import settings, shapes

from . import nag
from .config import VhsConfig
from .feature import StoreFeature, StoreWiring
from .function import allow, allow_listing, metrics_namespace
from .monitoring import Alarms
from .store import dictionary_arn


def gc_function_name(config: VhsConfig) -> str:
    """A fixed name: the role's self-invoke statement is built from it (see the docstring)."""
    return config.physical_name("gc")


class GarbageCollection(StoreFeature):
    def __init__(self, scope: Construct, id: str, **wiring: Unpack[StoreWiring]) -> None:
        """The collector is told of the store what the Ingest is (`StoreWiring`), so it
        judges with the retention ingest writes with."""
        super().__init__(scope, id, **wiring)
        config, store = self.config, self.store
        shape = config.gc
        function_name = gc_function_name(config)
        # The function's own ARN, from its fixed name: not `self.function.function_arn`,
        # which would make the role's policy depend on the function that depends on it.
        self.function_arn = cdk.Stack.of(self).format_arn(
            service="lambda",
            resource="function",
            resource_name=function_name,
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        self.add_function(
            settings.GC_FUNCTION,
            does="deletes body objects no retained version uses",
            role="garbage collector: list, judge, delete orphans",
            statements=self._statements(),
            # The collector judges versions by retention, exactly as readers do (docs/gc.md):
            # it must have the retention the ingest function writes and readers read with, or
            # it would collect bodies that readers still consider retained. It writes no
            # bodies, so the inline threshold is not among its settings.
            environment=settings.gc_environment(
                dataclasses.replace(store, inline_threshold=None), grace=shape.grace
            ),
            shape=shape,
            function_name=function_name,
            no_dlq_reason=(
                "The events of this asynchronously invoked function are only `{parallel: N}` "
                "and lists of shards to collect: a failed one is retried twice, raises the "
                "GcErrors alarm, and the next scheduled run collects every shard again, so a "
                "DLQ would hold nothing to replay."
            ),
        )

        self.rule = self._schedule()

        nag.acknowledge_wildcard(
            self.role,
            self.body_objects,
            "Object-level access under the store's body prefix only: the collector deletes "
            "orphaned bodies, whose keys are content-addressed ({prefix}/{shard}/{id}/{sha256}) "
            "and found by listing, so they cannot be named in advance. The actions are "
            "GetObject (HeadObject) and DeleteObject; no PutObject, no DeleteObjectVersion.",
        )

        self.add_alarms(self._alarms)

    def _statements(self) -> list[iam.PolicyStatement]:
        """The role's statements: list, judge and delete orphans, and invoke itself."""
        store, bucket, table, body_objects = self.store, self.bucket, self.table, self.body_objects
        return [
            # ListBucket is ListObjectsV2, one shard prefix at a time.
            allow_listing("ListBodyShards", bucket, store.prefix),
            # HeadObject, for the `vhs-id` metadata of bodies whose id is cut in the key.
            allow("ReadBodyMetadata", ["s3:GetObject"], [body_objects]),
            # The current version only: the bucket is versioned, so a delete leaves a
            # noncurrent version for 30 days. No DeleteObjectVersion.
            allow("DeleteOrphanedBodies", ["s3:DeleteObject"], [body_objects]),
            # The store's zstd dictionaries sit under the prefix too, beside the shards
            # the collector lists, and every body packed with one needs it as long as
            # the body is kept: never deleted, whatever else allows it.
            iam.PolicyStatement(
                sid="NeverDeleteDictionaries",
                effect=iam.Effect.DENY,
                actions=["s3:DeleteObject"],
                resources=[dictionary_arn(bucket, store.prefix)],
            ),
            # BatchGetItem reads the ids of a listing page; UpdateItem writes and
            # clears the condemnation markers (conditional writes). No Scan of the
            # table, no GetItem.
            allow(
                "ReadAndMarkIndex",
                ["dynamodb:BatchGetItem", "dynamodb:UpdateItem"],
                [table.table_arn],
            ),
            # Scan of the sparse index of condemned items only (keys and deadlines), to
            # clear expired condemnations of ids with no object left to list.
            allow(
                "FindExpiredCondemnations",
                ["dynamodb:Scan"],
                [f"{table.table_arn}/index/{shapes.TABLE.condemned_index}"],
            ),
            allow(
                "InvokeItselfToFanOutAndContinue",
                ["lambda:InvokeFunction"],
                [self.function_arn],
            ),
        ]

    def _schedule(self) -> events.Rule:
        """The rule that runs the collector. Its target adds the function's resource policy
        for it (lambda:InvokeFunction by events.amazonaws.com, on condition of the rule's ARN)."""
        shape = self.config.gc
        return events.Rule(
            self,
            "Schedule",
            description=f"VHS {self.config.stage}: runs the garbage collector",
            schedule=events.Schedule.expression(shape.schedule_expression),
            targets=[
                targets.LambdaFunction(
                    self.function,
                    event=events.RuleTargetInput.from_object({"parallel": shape.parallel}),
                )
            ],
        )

    def _alarms(self, alarms: Alarms) -> list[cloudwatch.Alarm]:
        config = self.config
        self.errors_alarm = alarms.function_errors(
            "GcErrors",
            self.function,
            "GC failed: orphans are not being collected; no data is at risk; "
            "see docs/runbook.md (GC errors).",
        )
        # Ids or shards a run could not collect (the handler's gc_failed and
        # gc_failed_shards): the rest was collected, and the next run tries them again.
        failures = cloudwatch.MathExpression(
            expression="ids + shards",
            using_metrics={
                name: cloudwatch.Metric(
                    namespace=metrics_namespace(config),
                    metric_name=metric,
                    dimensions_map={"service": settings.GC_FUNCTION.service},
                    statistic="Sum",
                )
                for name, metric in (("ids", "gc_failed"), ("shards", "gc_failed_shards"))
            },
            period=cdk.Duration.seconds(config.alarms.period_seconds),
        )
        self.failures_alarm = alarms.alarm(
            "GcFailures",
            failures,
            "GC could not judge some ids or list some shards (throttling, access): their "
            "orphans wait for a later run; no data is at risk; see docs/runbook.md "
            "(GC failures).",
            threshold=1,
        )
        return [self.errors_alarm, self.failures_alarm]
