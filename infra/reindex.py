"""Reindex in AWS: a Step Functions state machine that replays every current record to the
change feed, through the reindex worker Lambda (handlers/reindex.py, docs/changes.md).

The state machine (standard, fixed name `vhs-<stage>-reindex`):

    Plan -> ReplaySegments (Distributed Map over the plan's segments)
              each segment: ReplayPage <-> SegmentDone? -> SegmentReplayed

* Plan: the worker checks the input ``{"total_segments"?, "rate"?, "page_size"?, "since"?,
  "until"?, "ids"?}`` before any work (types, ranges of `vhs.shapes.REINDEX`, unknown fields
  and `run_id` refused: the run id is the execution's name) and answers the run and one item
  per segment, each with its own share of an id list. A refused input fails the execution at
  once, naming the field (InvalidInput, never retried).
* A Distributed Map runs the segments, at most `max_concurrency` at once, each as a child
  execution of its own (STANDARD: a segment of a large table loops for hours, and each child
  has its own 25,000-event history). The console's Map Run view shows every segment's state.
* Each segment invokes the worker with its cursor until the worker says `done`: the cursor is
  in the state, so a failed execution redriven (`aws stepfunctions redrive-execution`)
  resumes every failed segment from the invocation that failed, with its last cursor.
* LambdaInvoke retries Lambda's service errors and throttling with backoff; a worker error
  (a DynamoDB or SNS failure past botocore's retries) is retried 3 times, then the segment,
  and with it the Map Run, fails: the ReindexFailures alarm fires; redrive once it is fixed.
  Bad input and configuration (`vhs.errors.permanent_error_names`) are not retried.
* A child's output is its segment and totals only: the Map's results are bounded by the
  number of segments, whatever the id list.
* The rate bound is the worker's (records/s per segment): at most
  min(segments, max_concurrency) x rate records/s in all.

Roles, statement by statement: the worker may Scan and BatchGetItem the table, publish to the
change topic and use its key, and write its own logs; the state machine may invoke the worker
(CDK's LambdaInvoke grant), start, describe and stop its own child executions (the
Distributed Map), deliver its logs and traces.
"""

from __future__ import annotations

from typing import Unpack, cast

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from vhs import settings, shapes

from . import nag
from .config import VhsConfig
from .feature import StoreFeature, StoreWiring
from .function import allow, log_group
from .machine import plan_task, worker_task
from .monitoring import TOPIC_KEY_ACTIONS, Alarms

# What the worker reads: the Scan of a segment, and BatchGetItem for an id list.
TABLE_READ_ACTIONS = ("dynamodb:Scan", "dynamodb:BatchGetItem")
# Lambda's transient errors that LambdaInvoke's own retry (retry_on_service_exceptions) does
# not cover: throttling of the worker by the account's concurrency.
LAMBDA_THROTTLED = ("Lambda.TooManyRequestsException",)
MAP_LABEL = "ReplaySegments"  # the Distributed Map's label: its map runs are named by it


class Reindex(StoreFeature):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        topic_arn: str,
        topic_key_arn: str,
        shape: shapes.ReindexShape = shapes.REINDEX,
        **wiring: Unpack[StoreWiring],
    ) -> None:
        """The worker reads the store's table with what ingest is told of the store
        (`StoreWiring`), and publishes to the change topic `topic_arn` with its key."""
        super().__init__(scope, id, **wiring)
        config, store, table = self.config, self.store, self.table
        # A fixed name: the Distributed Map's role names its own executions by it.
        name = config.physical_name("reindex")
        self.add_function(
            settings.REINDEX_FUNCTION,
            does="replays current records to the change feed",
            role="reindex worker: scan the table, publish",
            statements=[
                allow("ScanTheTable", TABLE_READ_ACTIONS, [table.table_arn]),
                # sns:Publish also authorizes PublishBatch.
                allow("PublishReplays", ["sns:Publish"], [topic_arn]),
                allow("EncryptReplays", TOPIC_KEY_ACTIONS, [topic_key_arn]),
            ],
            environment=settings.reindex_environment(
                store, topic_arn=topic_arn, stop_at_remaining_ms=shape.stop_at_remaining_ms
            ),
            shape=shape,
            no_dlq_reason=(
                "This function is invoked synchronously by the reindex state machine, which "
                "retries it and keeps its cursor in the execution's state: a failed execution "
                "is redriven, so there is nothing for a DLQ to hold."
            ),
        )

        self.state_machine_log_group = log_group(
            self,
            "StateMachineLogs",
            config,
            # The prefix AWS recommends for vended logs: no resource policy per log group.
            log_group_name=f"/aws/vendedlogs/states/{name}",
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            state_machine_name=name,
            state_machine_type=sfn.StateMachineType.STANDARD,
            comment=f"VHS {config.stage}: replay every current record to the change feed",
            definition_body=sfn.DefinitionBody.from_chainable(self._definition(shape)),
            timeout=cdk.Duration.hours(shape.execution_timeout_hours),
            tracing_enabled=True,
            logs=sfn.LogOptions(
                destination=self.state_machine_log_group,
                level=sfn.LogLevel.ALL,
                include_execution_data=True,
            ),
        )
        # As for the functions (infra/function.py): the RoleArn GetAtt already orders the
        # state machine after its role; CDK's DependsOn on the role too is redundant (cfn-lint
        # W3005). The one on the role's policy stays.
        machine = cast(sfn.CfnStateMachine, self.state_machine.node.default_child)
        policy = self.state_machine.role.node.find_child("DefaultPolicy").node.default_child
        machine.add_override("DependsOn", [cast(cdk.CfnResource, policy).logical_id])
        self._acknowledge(config)

        self.add_alarms(self._alarms)

    def _alarms(self, alarms: Alarms) -> list[cloudwatch.Alarm]:
        period = cdk.Duration.seconds(self.config.alarms.period_seconds)
        failures = cloudwatch.MathExpression(
            expression="failed + timedout",
            using_metrics={
                "failed": self.state_machine.metric_failed(period=period, statistic="Sum"),
                "timedout": self.state_machine.metric_timed_out(period=period, statistic="Sum"),
            },
            period=period,
        )
        self.failures_alarm = alarms.alarm(
            "ReindexFailures",
            failures,
            "A reindex execution failed or timed out: some segments were not replayed. "
            "Fix the cause (the failed segment's worker log), then resume it with "
            "aws stepfunctions redrive-execution --execution-arn ... (docs/changes.md).",
            threshold=1,
        )
        return [self.failures_alarm]

    def _definition(self, shape: shapes.ReindexShape) -> sfn.IChainable:
        plan = plan_task(
            self,
            self.function,
            comment="the input checked before any work; the run and one item per segment",
        )
        # Bad input and configuration fail at once (worker_task's first Retrier): trying
        # again cannot fix them.
        replay = worker_task(
            self,
            "ReplayPage",
            self.function,
            comment="the worker: pages from the cursor until its time is short",
        )
        replay.add_retry(
            errors=list(LAMBDA_THROTTLED),
            interval=cdk.Duration.seconds(5),
            max_attempts=10,
            backoff_rate=2,
            jitter_strategy=sfn.JitterType.FULL,
        )
        replay.add_retry(
            errors=["States.TaskFailed"],
            interval=cdk.Duration.seconds(30),
            max_attempts=3,
            backoff_rate=2,
            jitter_strategy=sfn.JitterType.FULL,
        )
        done = sfn.Choice(self, "SegmentDone", comment="loop with the cursor until done")
        # A child's output is its segment's totals only (never the run or its ids), so the
        # Map's results stay small whatever the run: at most max_segments x ~200 bytes.
        replayed = sfn.Pass(
            self,
            "SegmentReplayed",
            parameters={"segment.$": "$.segment", "totals.$": "$.totals"},
        )
        done.when(sfn.Condition.boolean_equals("$.done", True), replayed).otherwise(replay)
        each = sfn.DistributedMap(
            self,
            "ReplaySegments",
            comment="one child execution per Scan segment",
            items_path="$.segments",
            item_selector={
                "segment.$": "$$.Map.Item.Value.segment",
                "share.$": "$$.Map.Item.Value.share",
                "run.$": "$.run",
            },
            max_concurrency=shape.max_concurrency,
            map_execution_type=sfn.StateMachineType.STANDARD,
            label=MAP_LABEL,
            # Every segment's totals are in its child execution (the Map Run view); the
            # parent's output stays small however many segments there are.
            result_path=sfn.JsonPath.DISCARD,
        )
        each.item_processor(replay.next(done))
        return plan.next(each)

    def _acknowledge(self, config: VhsConfig) -> None:
        role = self.state_machine.role
        # The Distributed Map's own policy (CDK's): describe and stop this state machine's
        # child executions, named by its name as CDK derives it from the ARN.
        name = cdk.Fn.select(6, cdk.Fn.split(":", self.state_machine.state_machine_arn))
        executions = (
            f"arn:{cdk.Aws.PARTITION}:states:{cdk.Aws.REGION}:{cdk.Aws.ACCOUNT_ID}:execution:{name}"
        )
        for arn in (f"{executions}:*", f"{executions}/{MAP_LABEL}:*"):
            nag.acknowledge_wildcard(
                self.state_machine,
                arn,
                "The Distributed Map starts one child execution per segment, named by Step "
                "Functions at run time: DescribeExecution and StopExecution can only name "
                "this state machine's executions (and its map runs') by a wildcard.",
            )
        nag.acknowledge_wildcard(
            role,
            f"{self.function.function_arn}:*",
            "CDK's LambdaInvoke grant covers the worker's versions and aliases "
            "(function ARN + ':*'): still the one worker function, no other.",
        )
        nag.acknowledge(
            role,
            "AwsSolutions-IAM5",
            "X-Ray (tracing) and CloudWatch Logs delivery (logging, which cdk-nag requires "
            "of state machines) support no resource-level permissions: AWS requires "
            "Resource '*' for xray:PutTraceSegments and logs:CreateLogDelivery and the like.",
            finding="Resource::*",
        )
