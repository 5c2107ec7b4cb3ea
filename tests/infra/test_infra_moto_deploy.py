"""The synthesized templates deploy: every stack, into moto's CloudFormation, in order.

The app is built as `cdk deploy` builds it, with two differences made through props, and a
few edits to the copy of each template that moto receives, each for a stated moto limit:

* props: no bootstrap-version rule (moto has no CDK bootstrap stack), and no SQS event source
  mapping (``ingestEventSource=false``): with one, moto tries to run the function in Docker on
  every message sent to the queue;
* template copies: the Powertools parameter default names a stand-in SSM parameter, because
  the public ``/aws/service/...`` name is reserved and moto refuses to hold it; Tags are
  dropped from SSM parameters and KMS keys, whose tag formats moto's CloudFormation parses
  wrongly; alarms and the dashboard are dropped because moto's CloudFormation has no alarms
  (it skips them, and the dashboard body's references to them then fail); and event source
  mappings, because moto runs the function in Docker for a stream mapping on every table
  write. The assertion tests (test_infra_template.py, test_infra_changes.py) cover what is
  dropped here.

The Lambda asset is zipped and uploaded to the CDK assets bucket first, from the assembly's
asset manifest, as `cdk deploy` publishes it.
"""

from __future__ import annotations

import copy
import io
import json
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from infra_support import LAMBDA_HANDLER, synthesize

from infra import VhsConfig
from infra.config import powertools_layer_name
from vhs import shapes
from vhs_ops.local.stack import MotoServer

ACCOUNT = "123456789012"
REGION = "us-east-1"
STAGE = "moto"
STAND_IN_LAYER_PARAMETER = "/vhs-test/powertools-layer"
MOTO_SKIPS = (
    "AWS::CloudWatch::Alarm",
    "AWS::CloudWatch::Dashboard",
    # The change feed's stream mapping: moto would run the function in Docker on every write.
    "AWS::Lambda::EventSourceMapping",
)
MOTO_TAG_BUGS = ("AWS::SSM::Parameter", "AWS::KMS::Key")


@dataclass
class Deployed:
    endpoint: str
    outputs: dict[str, dict[str, str]]
    parameters: dict[str, dict[str, str]]
    layer_arn: str

    def client(self, service: str) -> Any:
        return boto3.client(service, endpoint_url=self.endpoint, region_name=REGION)


def zipped(directory: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(directory.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(directory))
    return buffer.getvalue()


def publish_assets(s3: Any, outdir: Path, stack_name: str) -> None:
    manifest = json.loads((outdir / f"{stack_name}.assets.json").read_text())
    for asset in manifest["files"].values():
        source = outdir / asset["source"]["path"]
        body = zipped(source) if asset["source"].get("packaging") == "zip" else source.read_bytes()
        for destination in asset["destinations"].values():
            bucket = (
                destination["bucketName"]
                .replace("${AWS::AccountId}", ACCOUNT)
                .replace("${AWS::Region}", REGION)
            )
            s3.put_object(Bucket=bucket, Key=destination["objectKey"], Body=body)


def for_moto(template: dict[str, Any]) -> dict[str, Any]:
    """A copy of the template with the edits the module docstring lists, and only those."""
    template = copy.deepcopy(template)
    resources_ = template["Resources"]
    for name in [n for n, r in resources_.items() if r["Type"] in MOTO_SKIPS]:
        del resources_[name]
        for output in [o for o, v in template.get("Outputs", {}).items() if name in json.dumps(v)]:
            del template["Outputs"][output]
    for resource in resources_.values():
        if resource["Type"] in MOTO_TAG_BUGS:
            resource["Properties"].pop("Tags", None)
    for parameter in template.get("Parameters", {}).values():
        if parameter.get("Default", "").startswith("/aws/service/powertools/"):
            parameter["Default"] = STAND_IN_LAYER_PARAMETER
    return template


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployed]:
    outdir = tmp_path_factory.mktemp("cdk.out.moto")
    synthesized = synthesize(
        outdir,
        config=VhsConfig(stage=STAGE, ingest_event_source=False),
        bootstrap_version_rule=False,
        nag=False,  # checked on the real app in test_infra_checks.py
    )
    with MotoServer() as server:
        session = Deployed(server.endpoint, {}, {}, "")
        s3, cloudformation = session.client("s3"), session.client("cloudformation")
        # A stand-in for the AWS-managed Powertools layer, found through SSM as in AWS.
        session.layer_arn = session.client("lambda").publish_layer_version(
            LayerName=powertools_layer_name(),
            Content={"ZipFile": _empty_zip()},
        )["LayerVersionArn"]
        session.client("ssm").put_parameter(
            Name=STAND_IN_LAYER_PARAMETER, Value=session.layer_arn, Type="String"
        )
        s3.create_bucket(Bucket=f"cdk-hnb659fds-assets-{ACCOUNT}-{REGION}")
        stacks = synthesized.stacks
        # dependency order
        for stack in (stacks.store, stacks.ingest, stacks.changes, stacks.maintenance):
            publish_assets(s3, outdir, stack.stack_name)
            cloudformation.create_stack(
                StackName=stack.stack_name,
                TemplateBody=json.dumps(for_moto(synthesized.template_json(stack))),
                Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"],
            )
            (description,) = cloudformation.describe_stacks(StackName=stack.stack_name)["Stacks"]
            assert description["StackStatus"] == "CREATE_COMPLETE", description
            session.outputs[stack.stack_name] = {
                o["OutputKey"]: o["OutputValue"] for o in description.get("Outputs", [])
            }
            session.parameters[stack.stack_name] = {
                p["ParameterKey"]: p.get("ResolvedValue", p["ParameterValue"])
                for p in description.get("Parameters", [])
            }
        yield session


def _empty_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w"):
        pass
    return buffer.getvalue()


def store_outputs(deployed: Deployed) -> dict[str, str]:
    return deployed.outputs[f"Vhs-{STAGE}-Store"]


def ingest_outputs(deployed: Deployed) -> dict[str, str]:
    return deployed.outputs[f"Vhs-{STAGE}-Ingest"]


def test_table_is_created_with_the_shared_key_schema_and_stream(deployed: Deployed) -> None:
    name = store_outputs(deployed)["TableName"]
    assert name == f"vhs-{STAGE}-records"
    table = deployed.client("dynamodb").describe_table(TableName=name)["Table"]
    assert table["KeySchema"] == [{"AttributeName": shapes.TABLE.partition_key, "KeyType": "HASH"}]
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    assert table["StreamSpecification"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"


def test_buckets_are_created(deployed: Deployed) -> None:
    outputs = store_outputs(deployed)
    s3 = deployed.client("s3")
    for key in ("BucketName", "StagingBucketName", "AccessLogBucketName"):
        s3.head_bucket(Bucket=outputs[key])
    assert outputs["BucketName"] == f"vhs-{STAGE}-bodies-{ACCOUNT}-{REGION}"
    # (moto's CloudFormation does not apply bucket settings such as versioning; the template
    # tests check those.)


def test_queues_are_created_with_the_shared_shape(deployed: Deployed) -> None:
    outputs = ingest_outputs(deployed)
    sqs = deployed.client("sqs")
    queue = sqs.get_queue_attributes(QueueUrl=outputs["QueueUrl"], AttributeNames=["All"])[
        "Attributes"
    ]
    dlq = sqs.get_queue_attributes(QueueUrl=outputs["DeadLetterQueueUrl"], AttributeNames=["All"])[
        "Attributes"
    ]
    assert int(queue["VisibilityTimeout"]) == shapes.INGEST.visibility_timeout_seconds
    redrive = json.loads(queue["RedrivePolicy"])
    assert redrive == {"deadLetterTargetArn": dlq["QueueArn"], "maxReceiveCount": 5}
    assert int(dlq["MessageRetentionPeriod"]) == 14 * 24 * 3600
    assert queue["SqsManagedSseEnabled"] == dlq["SqsManagedSseEnabled"] == "true"


def test_function_is_created_with_its_environment(deployed: Deployed) -> None:
    # moto's CloudFormation passes on only some function properties: it drops Architectures,
    # Layers, TracingConfig and LoggingConfig (the template tests check those).
    outputs = ingest_outputs(deployed)
    configuration = deployed.client("lambda").get_function_configuration(
        FunctionName=outputs["FunctionName"]
    )
    assert configuration["Runtime"] == "python3.14"
    assert configuration["Handler"] == LAMBDA_HANDLER
    assert configuration["Timeout"] == shapes.INGEST.function_timeout_seconds
    assert configuration["MemorySize"] == shapes.INGEST.function_memory_mb
    env = configuration["Environment"]["Variables"]
    assert env["VHS_TABLE_NAME"] == store_outputs(deployed)["TableName"]
    assert env["VHS_BUCKET_NAME"] == store_outputs(deployed)["BucketName"]
    assert env["VHS_STAGING_BUCKET"] == store_outputs(deployed)["StagingBucketName"]
    assert env["VHS_DLQ_URL"].rsplit("/", 1)[1] == outputs["DeadLetterQueueUrl"].rsplit("/", 1)[1]


def test_the_powertools_layer_arn_resolves_through_ssm(deployed: Deployed) -> None:
    (resolved,) = [
        value
        for key, value in deployed.parameters[f"Vhs-{STAGE}-Ingest"].items()
        if key.startswith("SsmParameterValueawsservicepowertools")
    ]
    assert resolved == deployed.layer_arn


def test_no_event_source_mapping_in_the_moto_deployment(deployed: Deployed) -> None:
    mappings = deployed.client("lambda").list_event_source_mappings()["EventSourceMappings"]
    assert mappings == []


def test_producers_find_the_queue_and_staging_bucket_in_ssm(deployed: Deployed) -> None:
    ssm = deployed.client("ssm")

    def value(name: str) -> str:
        return ssm.get_parameter(Name=f"/vhs/{STAGE}/{name}")["Parameter"]["Value"]

    assert value("queue-url") == ingest_outputs(deployed)["QueueUrl"]
    assert value("staging-bucket") == store_outputs(deployed)["StagingBucketName"]
    assert value("table-name") == store_outputs(deployed)["TableName"]
    assert value("producer-policy-arn") == ingest_outputs(deployed)["ProducerPolicyArn"]


def test_alarm_topic_is_created(deployed: Deployed) -> None:
    arn = ingest_outputs(deployed)["AlarmTopicArn"]
    attributes = deployed.client("sns").get_topic_attributes(TopicArn=arn)["Attributes"]
    assert attributes["KmsMasterKeyId"]


def test_change_feed_topic_and_dlq_are_created(deployed: Deployed) -> None:
    outputs = deployed.outputs[f"Vhs-{STAGE}-Changes"]
    sns = deployed.client("sns")
    attributes = sns.get_topic_attributes(TopicArn=outputs["ChangeTopicArn"])["Attributes"]
    assert attributes["FifoTopic"] == "true"
    assert attributes["KmsMasterKeyId"]
    assert outputs["ChangeTopicArn"].endswith(f":vhs-{STAGE}-changes.fifo")
    dlq = deployed.client("sqs").get_queue_attributes(
        QueueUrl=outputs["ChangeDeadLetterQueueUrl"], AttributeNames=["All"]
    )["Attributes"]
    assert dlq["SqsManagedSseEnabled"] == "true"
    ssm = deployed.client("ssm")
    stream = ssm.get_parameter(Name=f"/vhs/{STAGE}/table-stream-arn")["Parameter"]["Value"]
    assert stream == store_outputs(deployed)["TableStreamArn"]
    env = deployed.client("lambda").get_function_configuration(
        FunctionName=outputs["ChangeFunctionName"]
    )["Environment"]["Variables"]
    assert env["VHS_CHANGE_TOPIC_ARN"] == outputs["ChangeTopicArn"]


def test_the_garbage_collector_and_its_schedule_are_created(deployed: Deployed) -> None:
    # moto creates the rule and its target but never invokes it (no EventBridge -> Lambda).
    outputs = deployed.outputs[f"Vhs-{STAGE}-Maintenance"]
    assert outputs["GcFunctionName"] == f"vhs-{STAGE}-gc"
    configuration = deployed.client("lambda").get_function_configuration(
        FunctionName=outputs["GcFunctionName"]
    )
    assert configuration["Handler"] == "handlers.gc.handler"
    assert configuration["Timeout"] == shapes.GC.function_timeout_seconds
    env = configuration["Environment"]["Variables"]
    assert env["VHS_TABLE_NAME"] == store_outputs(deployed)["TableName"]
    assert env["VHS_BUCKET_NAME"] == store_outputs(deployed)["BucketName"]
    assert env["VHS_GC_GRACE"] == shapes.GC.grace
    events = deployed.client("events")
    rule = events.describe_rule(Name=outputs["GcRuleName"])
    assert rule["ScheduleExpression"] == shapes.GC.schedule_expression
    assert rule["State"] == "ENABLED"
    (target,) = events.list_targets_by_rule(Rule=outputs["GcRuleName"])["Targets"]
    assert target["Arn"] == configuration["FunctionArn"]
    assert json.loads(target["Input"]) == {"parallel": shapes.GC.parallel}
    policy = json.loads(
        deployed.client("lambda").get_policy(FunctionName=outputs["GcFunctionName"])["Policy"]
    )
    (statement,) = policy["Statement"]
    assert statement["Principal"] == {"Service": "events.amazonaws.com"}
    assert statement["Condition"]["ArnLike"]["AWS:SourceArn"] == rule["Arn"]
