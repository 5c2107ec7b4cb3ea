"""The DLQ alarm on the local stack, evaluated as CloudWatch evaluates it.

The alarm itself is created in (moto's) CloudWatch from `shapes.DLQ_ALARM`, the definition
the CDK deploys: the maximum of AWS/SQS ApproximateNumberOfMessagesVisible for the DLQ over a
period, at or above 1. moto stores alarms but never evaluates them, and its SQS publishes no
metrics, so `AlarmEvaluator` does both jobs here. Once a period it samples the metric the way
SQS does (GetQueueAttributes ApproximateNumberOfMessages is the same number), keeps the last
`evaluation_periods` datapoints, decides the state as CloudWatch does (ALARM when
`datapoints_to_alarm` of them breach, otherwise OK), and on a change calls SetAlarmState, so
DescribeAlarms shows it, and reports the transition.

Locally a period is compressed (one second by default, instead of the deployed 60 s) so that
a change shows at once; everything else is the deployed definition.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from datetime import UTC, datetime
from typing import Any

from vhs.shapes import DLQ_ALARM

from .event_source import Background

log = logging.getLogger(__name__)

OK, ALARM, INSUFFICIENT_DATA = "OK", "ALARM", "INSUFFICIENT_DATA"
_COMPARISONS = {
    "GreaterThanOrEqualToThreshold": ("greater than or equal to", lambda v, t: v >= t),
    "GreaterThanThreshold": ("greater than", lambda v, t: v > t),
    "LessThanThreshold": ("less than", lambda v, t: v < t),
    "LessThanOrEqualToThreshold": ("less than or equal to", lambda v, t: v <= t),
}


def put_dlq_alarm(
    cloudwatch: Any, *, alarm_name: str, dlq_name: str, shape: Any = DLQ_ALARM
) -> None:
    """Create (or update) the DLQ alarm from the shared shape."""
    kwargs: dict[str, Any] = {
        "AlarmName": alarm_name,
        "AlarmDescription": "A message reached the ingest dead-letter queue: it was not stored.",
        "Namespace": shape.namespace,
        "MetricName": shape.metric_name,
        "Dimensions": [{"Name": "QueueName", "Value": dlq_name}],
        "Statistic": shape.statistic,
        "Period": shape.period_seconds,
        "EvaluationPeriods": shape.evaluation_periods,
        "Threshold": float(shape.threshold),
        "ComparisonOperator": shape.comparison_operator,
        "TreatMissingData": getattr(shape, "treat_missing_data", "notBreaching"),
    }
    datapoints = getattr(shape, "datapoints_to_alarm", None)
    if datapoints:
        kwargs["DatapointsToAlarm"] = datapoints
    cloudwatch.put_metric_alarm(**kwargs)


@dataclass(frozen=True)
class Transition:
    at: datetime
    old: str
    new: str
    value: float  # the datapoint that decided it
    reason: str

    def __str__(self) -> str:
        return f"{self.at:%H:%M:%S} {self.old} -> {self.new}: {self.reason}"


@dataclass(eq=False)
class AlarmEvaluator(Background):
    """Evaluates one alarm on an SQS queue's ApproximateNumberOfMessagesVisible, once per
    `period_seconds`, in a thread (`start`) or one step at a time (`evaluate`)."""

    kind = "DLQ alarm evaluator"
    stop_timeout = 10.0

    cloudwatch: Any
    sqs: Any
    _: KW_ONLY
    alarm_name: str
    queue_url: str
    period_seconds: float = 1.0
    on_transition: Callable[[Transition], None] | None = None

    def __post_init__(self) -> None:
        super().__init__()
        alarm = self._describe()
        self.evaluation_periods = int(alarm["EvaluationPeriods"])
        self.datapoints_to_alarm = int(alarm.get("DatapointsToAlarm") or self.evaluation_periods)
        self.threshold = float(alarm["Threshold"])
        self.comparison = alarm["ComparisonOperator"]
        self.state: str = alarm.get("StateValue", INSUFFICIENT_DATA)
        self.datapoints: deque[float] = deque(maxlen=self.evaluation_periods)
        self.transitions: list[Transition] = []
        self.last_value: float | None = None
        self._lock = threading.Lock()

    def _describe(self) -> dict[str, Any]:
        alarms = self.cloudwatch.describe_alarms(AlarmNames=[self.alarm_name])["MetricAlarms"]
        if not alarms:
            raise LookupError(f"no alarm named {self.alarm_name}")
        return alarms[0]

    def sample(self) -> float:
        """The queue's ApproximateNumberOfMessagesVisible, as SQS would publish it."""
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        return float(attributes.get("ApproximateNumberOfMessages", 0))

    def evaluate(self) -> str:
        """Close one period: take its datapoint, decide the state, record any change."""
        with self._lock:
            value = self.sample()
            self.last_value = value
            self.datapoints.append(value)
            words, breaches = _COMPARISONS[self.comparison]
            breaching = [v for v in self.datapoints if breaches(v, self.threshold)]
            new = ALARM if len(breaching) >= self.datapoints_to_alarm else OK
            if new == self.state:
                return new
            shown = ", ".join(f"{v:g}" for v in self.datapoints)
            count = len(breaching) if new == ALARM else len(self.datapoints) - len(breaching)
            reason = (
                f"Threshold Crossed: {count} out of the last {len(self.datapoints)} datapoints "
                f"[{shown}] {'was' if new == ALARM else 'was not'} {words} the threshold "
                f"({self.threshold:g})."
            )
            now = datetime.now(UTC)
            self.cloudwatch.set_alarm_state(
                AlarmName=self.alarm_name,
                StateValue=new,
                StateReason=reason,
                StateReasonData=json.dumps(
                    {
                        "version": "1.0",
                        "queryDate": now.isoformat(),
                        "statistic": "Maximum",
                        "recentDatapoints": list(self.datapoints),
                        "threshold": self.threshold,
                    }
                ),
            )
            transition = Transition(now, self.state, new, value, reason)
            self.state = new
            self.transitions.append(transition)
        if self.on_transition:
            self.on_transition(transition)
        return new

    def cloudwatch_state(self) -> str:
        """The state CloudWatch (moto) holds for the alarm."""
        return self._describe()["StateValue"]

    # --- in a thread ---------------------------------------------------------------------------

    def _workers(self) -> list[tuple[str, Callable[[], None]]]:
        return [("dlq-alarm", self._run)]

    def _run(self) -> None:
        while not self._stopping.wait(self.period_seconds):
            try:
                self.evaluate()
            except Exception as error:  # a missed datapoint, as when CloudWatch has no data
                log.warning("could not evaluate the DLQ alarm, will try again: %s", error)
