"""What every feature construct is given, and how it wires its function and alarms.

A feature (ingest, the change feed, the collector, the read API, reindex, bulk import) is the
construct of one stateless stack. It is given the deployment's configuration and the alarm
topic its alarms notify (`Wiring`; no topic, no alarms). One that opens the store is given
the Store stack's body bucket and index table too, and what its functions are told of the
store (`StoreWiring`): by default this configuration's store in that bucket and table; the
stacks hand every feature the same one, so the collector judges versions with exactly the
retention that ingest writes and readers read with.

`Feature.add_function` makes the feature's `VhsFunction` (infra/function.py) and keeps its
shape, log group and role beside it; `Feature.add_alarms` makes its alarms when it has a topic.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NotRequired, TypedDict, Unpack

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from constructs import Construct

from vhs import settings, shapes

from .config import VhsConfig
from .function import VhsFunction
from .monitoring import Alarms
from .store import dictionary_arn, object_arn


class Wiring(TypedDict):
    """What every feature is given."""

    config: VhsConfig
    alarm_topic: NotRequired[sns.ITopic | None]


class StoreWiring(Wiring):
    """What a feature that opens the store is given besides."""

    bucket: s3.IBucket
    table: dynamodb.ITable
    store: NotRequired[settings.StoreSettings | None]


class Feature(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: VhsConfig,
        alarm_topic: sns.ITopic | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.config = config
        self.alarm_topic = alarm_topic
        self.alarms: list[cloudwatch.Alarm] = []

    def add_function(
        self,
        spec: settings.FunctionSpec,
        *,
        does: str,
        role: str,
        shape: shapes.FunctionShape,
        **options: Any,
    ) -> VhsFunction:
        """The feature's function of `shape` (kept as `self.shape`, which its alarms read),
        described as ``VHS <stage>: <does>``, with a role described as ``VHS <stage> <role>``;
        `options` are `VhsFunction`'s."""
        stage = self.config.stage
        self.shape = shape
        self.function = VhsFunction(
            self,
            config=self.config,
            spec=spec,
            description=f"VHS {stage}: {does}",
            role_description=f"VHS {stage} {role}",
            shape=shape,
            **options,
        )
        self.log_group, self.role = self.function.log_group, self.function.execution_role
        return self.function

    def add_alarms(self, make: Callable[[Alarms], list[cloudwatch.Alarm]]) -> None:
        """The alarms `make` makes, notifying the alarm topic; none without a topic."""
        if self.alarm_topic is not None:
            self.alarms = make(Alarms(self, self.config, actions.SnsAction(self.alarm_topic)))


class StoreFeature(Feature):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        bucket: s3.IBucket,
        table: dynamodb.ITable,
        store: settings.StoreSettings | None = None,
        **wiring: Unpack[Wiring],
    ) -> None:
        super().__init__(scope, id, **wiring)
        self.bucket, self.table = bucket, table
        self.store = store or self.config.store_settings(table.table_name, bucket.bucket_name)
        # Every object under the store's body prefix: what its object-level statements name.
        self.body_objects = object_arn(bucket, self.store.prefix)
        # The store's zstd dictionaries: what every reader of a packed body may need.
        self.dictionary_objects = dictionary_arn(bucket, self.store.prefix)
