"""The features' functions running on the local stack, each the real handler loaded with the
environment infra/ gives its function: the ingest pipeline (`LocalPipeline`: the SQS event
source, the DLQ alarm evaluated beside it) and the change feed (`LocalChangeFeed`: the stream
event source, its give-ups sent to a DLQ). `vhs local up`, `make demo`, the end-to-end tests
and the pipeline benchmark run them. Apart from the event sources (sqs_source.py,
stream_source.py), which emulate Lambda's pollers for any handler and know nothing of the
stack.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhs import settings
from vhs.settings import INGEST_FUNCTION

from .alarms import AlarmEvaluator
from .event_source import Handler, LocalFunction
from .sqs_source import SqsEventSource
from .stack import client, endpoint_environment, function_environment
from .stream_failures import sqs_destination
from .stream_source import DynamoDBStreamSource, StreamSourceConfig


@dataclass
class LocalPipeline(LocalFunction):
    """The local stack's ingest pipeline, running: the event source invoking the real ingest
    handler with the function's environment, and the DLQ alarm evaluated beside it.

    `on_alarm` is called with each alarm Transition as it happens. `alarm_period` is how many
    seconds stand for one of the alarm's periods (60 s on AWS): locally a period is compressed
    so a change shows at once."""

    stack: Any  # local.LocalStack, provisioned with its pipeline
    function_log: Path | None = None
    on_alarm: Callable[[Any], None] | None = None
    alarm_period: float = 1.0
    batch_size: int | None = None
    batching_window_seconds: float | None = None
    handler: Handler | None = None
    source: SqsEventSource | None = field(default=None, init=False)
    alarm: Any = field(default=None, init=False)
    module: Any = field(default=None, init=False)
    _exit: contextlib.ExitStack | None = field(default=None, init=False)

    def _start(self, running: contextlib.ExitStack) -> None:
        stack = self.stack
        handler = self._load(running, INGEST_FUNCTION, stack.function_env(), self.function_log)
        sqs = client("sqs", stack.endpoint, stack.region)
        self.alarm = AlarmEvaluator(
            client("cloudwatch", stack.endpoint, stack.region),
            sqs,
            alarm_name=stack.alarm_name,
            queue_url=stack.dlq_url,
            period_seconds=self.alarm_period,
            on_transition=self.on_alarm,
        )
        running.enter_context(self.alarm)
        self.source = SqsEventSource(
            sqs,
            stack.queue_url,
            handler,
            queue_arn=stack.queue_arn,
            region=stack.region,
            batch_size=self.batch_size,
            batching_window_seconds=self.batching_window_seconds,
            function_name=stack.function_name,
        )
        running.enter_context(self.source)

    def running(self) -> tuple[SqsEventSource, Any]:
        """(the event source, the alarm evaluator) of a started pipeline."""
        if self.source is None or self.alarm is None:
            raise RuntimeError("the pipeline is not running: start() it, or use `with`")
        return self.source, self.alarm

    def drain(self, timeout: float = 60.0) -> None:
        """Wait until the ingest queue is empty, then evaluate the alarm once more so its
        state reflects the DLQ as it now is."""
        source, alarm = self.running()
        source.run_until_idle(timeout)
        alarm.evaluate()


@dataclass
class LocalChangeFeed(LocalFunction):
    """The change feed on the local stack, running: the stream source invoking the real
    `changes` handler with the function's environment (as infra/changes.py sets it), reading
    the table's stream and publishing to `topic_arn` (an SNS FIFO topic:
    `vhs_ops.provisioning.create_change_topic`). `vhs local up` runs it beside the ingest pipeline.

    `threaded=False` leaves polling to `drain()` (and `source.poll_once()`) in the caller's
    thread. `dlq_url`, when set, receives what the source gives up on, as the deployed DLQ
    does. `config` is the source's (`StreamSourceConfig`; its function name is the feed's)."""

    endpoint: str
    table_name: str
    topic_arn: str
    bucket_name: str
    prefix: str = ""
    region: str = "us-east-1"
    dlq_url: str | None = None
    threaded: bool = True
    handler: Handler | None = None
    function_name: str = "vhs-local-changes"
    config: StreamSourceConfig = field(default_factory=StreamSourceConfig)
    source: DynamoDBStreamSource | None = field(default=None, init=False)
    module: Any = field(default=None, init=False)
    stream_arn: str = field(default="", init=False)
    _exit: Any = field(default=None, init=False)

    def function_env(self) -> dict[str, str]:
        """The function's environment, as infra/changes.py sets it (the prefix even when
        empty: it overrides one in this process's)."""
        return {
            **endpoint_environment(self.endpoint, self.region),
            **settings.changes_environment(topic_arn=self.topic_arn, bucket_name=self.bucket_name),
            settings.PREFIX: self.prefix,
            **function_environment(settings.CHANGES_FUNCTION),
        }

    def _start(self, running: contextlib.ExitStack) -> None:
        handler = self._load(running, settings.CHANGES_FUNCTION, self.function_env())
        dynamodb = client("dynamodb", self.endpoint, self.region)
        table = dynamodb.describe_table(TableName=self.table_name)["Table"]
        self.stream_arn = table["LatestStreamArn"]
        options: dict[str, Any] = {}
        if self.dlq_url:
            options["on_failure"] = sqs_destination(
                client("sqs", self.endpoint, self.region), self.dlq_url
            )
        self.source = DynamoDBStreamSource(
            client("dynamodbstreams", self.endpoint, self.region),
            self.stream_arn,
            handler,
            dataclasses.replace(self.config, function_name=self.function_name),
            region=self.region,
            **options,
        )
        if self.threaded:
            running.enter_context(self.source)

    def drain(self, timeout: float = 60.0) -> None:
        """Wait until every change written so far has been handled (see the source's)."""
        if self.source is None:
            raise RuntimeError("the change feed is not running: start() it, or use `with`")
        self.source.drain(timeout)
