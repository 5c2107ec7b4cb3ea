"""What every VHS stack shares, and how the stacks hand each other values.

Every stack is described as ``VHS <stage>: <what it holds>`` (`VhsStack`); a stateless stack
whose functions open the store imports the Store stack's bucket and table by name
(`StoreReaderStack`). Apart from which stacks there are and what each holds (stacks.py).

The Ingest stack refers to the Store's resources by their physical names (see
`VhsConfig.table_name` and `VhsConfig.bucket_name`), not by cross-stack references, so
neither stack's template depends on the other's outputs. The Changes stack needs two values
that have no fixed name, the table's stream ARN (its label is the stream's creation time) and
the alarm topic's ARN: the Store and Ingest stacks write them to SSM parameters
(``/vhs/<stage>/table-stream-arn``, ``/vhs/<stage>/alarm-topic-arn``), which CloudFormation
resolves when the Changes stack is deployed. No cross-stack export pins the stateful stack.
"""

from __future__ import annotations

from typing import ClassVar

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from vhs import settings

from .config import VhsConfig
from .feature import StoreWiring


def bucket_name(config: VhsConfig, role: str) -> str:
    return config.bucket_name(role, cdk.Aws.ACCOUNT_ID, cdk.Aws.REGION)


def store_settings(config: VhsConfig) -> settings.StoreSettings:
    """The deployed store, as its functions are told of it: the Store stack's table and body
    bucket by name, and the configuration's body prefix, inline threshold and retention.
    `build` makes one and hands it to the Ingest and the collector, so the collector judges
    versions with exactly the retention ingest writes with."""
    return config.store_settings(config.table_name, bucket_name(config, "bodies"))


def parameter_name(config: VhsConfig, name: str) -> str:
    return f"/vhs/{config.stage}/{name}"


def parameters(scope: Construct, config: VhsConfig, *rows: tuple[str, str, str]) -> None:
    """SSM parameters ``/vhs/<stage>/<name>``, one a (name, value, what it is) row."""
    for name, value, what in rows:
        ssm.StringParameter(
            scope,
            f"Parameter{''.join(part.title() for part in name.split('-'))}",
            parameter_name=parameter_name(config, name),
            string_value=value,
            description=f"VHS {config.stage}: {what}",
        )


def resolved(scope: Construct, config: VhsConfig, name: str) -> str:
    """The value of SSM parameter ``/vhs/<stage>/<name>``: a CloudFormation parameter of type
    AWS::SSM::Parameter::Value<String>, resolved at deploy time, so neither synth nor the
    stack that writes it depends on the stack that reads it."""
    return ssm.StringParameter.value_for_string_parameter(scope, parameter_name(config, name))


def outputs(stack: cdk.Stack, *rows: tuple[str, str, str]) -> None:
    """Stack outputs, one a (name, value, description) row."""
    for output, value, what in rows:
        cdk.CfnOutput(stack, output, value=value, description=what)


def alarm_topic(scope: Construct, config: VhsConfig) -> sns.ITopic:
    """The Ingest stack's alarm topic, through SSM (the Changes and Maintenance alarms)."""
    arn = resolved(scope, config, "alarm-topic-arn")
    return sns.Topic.from_topic_arn(scope, "AlarmTopic", arn)


class VhsStack(cdk.Stack):
    """A stack of one VHS deployment, described as ``VHS <stage>: <what it holds>``: `_open`
    imports what it uses of other stacks, then `_add` adds what it holds."""

    holds: ClassVar[str]

    def __init__(self, scope: Construct, id: str, *, config: VhsConfig, **kwargs) -> None:
        super().__init__(scope, id, description=f"VHS {config.stage}: {self.holds}", **kwargs)
        self.config = config
        self._open(config)
        self._add(config)

    def _open(self, config: VhsConfig) -> None:
        pass

    def _add(self, config: VhsConfig) -> None:
        raise NotImplementedError


class StoreReaderStack(VhsStack):
    """A stateless stack of functions that open the store: `store` (by default this
    configuration's) is what they are told of it, and names the Store stack's body bucket
    ("Bodies") and table ("Records"), imported by name."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: VhsConfig,
        store: settings.StoreSettings | None = None,
        **kwargs,
    ) -> None:
        self.store_settings = store or store_settings(config)
        super().__init__(scope, id, config=config, **kwargs)

    def _open(self, config: VhsConfig) -> None:
        self.bodies = s3.Bucket.from_bucket_name(self, "Bodies", self.store_settings.bucket_name)
        self.records = dynamodb.Table.from_table_name(
            self, "Records", self.store_settings.table_name
        )

    def wiring(self, *, alarms: bool = True) -> StoreWiring:
        """What its feature construct is given: the store, and the Ingest stack's alarm topic
        (through SSM) unless `alarms` is False."""
        return StoreWiring(
            config=self.config,
            store=self.store_settings,
            bucket=self.bodies,
            table=self.records,
            alarm_topic=alarm_topic(self, self.config) if alarms else None,
        )
