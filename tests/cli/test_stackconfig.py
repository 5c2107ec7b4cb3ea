"""`--stack NAME`: the CLI's configuration from a deployed stage's stack outputs."""

from __future__ import annotations

import json

import boto3
import moto
import pytest

from vhs.errors import ConfigurationError
from vhs_ops.cli.stackconfig import env_from_stacks, stack_prefix


def deploy(cloudformation, name: str, outputs: dict[str, str]) -> None:
    template = {
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    cloudformation.create_stack(StackName=name, TemplateBody=json.dumps(template))


@pytest.fixture
def cloudformation():
    with moto.mock_aws():
        yield boto3.client("cloudformation", region_name="us-east-1")


def test_reads_every_sibling_stack(cloudformation):
    deploy(
        cloudformation,
        "Vhs-prod-Store",
        {"TableName": "t", "BucketName": "b", "BodyPrefix": "bodies", "StagingBucketName": "s"},
    )
    deploy(
        cloudformation,
        "Vhs-prod-Ingest",
        {"QueueUrl": "https://q", "DeadLetterQueueUrl": "https://dlq", "FunctionName": "f"},
    )
    deploy(
        cloudformation,
        "Vhs-prod-ReadApi",
        {"ReadApiUrl": "https://abc.lambda-url.us-east-1.on.aws/", "ReaderPolicyArn": "arn:p"},
    )
    deploy(cloudformation, "Vhs-dev-Store", {"TableName": "other"})
    expected = {
        "VHS_TABLE_NAME": "t",
        "VHS_BUCKET_NAME": "b",
        "VHS_PREFIX": "bodies",
        "VHS_STAGING_BUCKET": "s",
        "VHS_QUEUE_URL": "https://q",
        "VHS_DLQ_URL": "https://dlq",
        # Without the function URL's trailing "/", as `vhs local up` exports its own.
        "VHS_READ_API_URL": "https://abc.lambda-url.us-east-1.on.aws",
    }
    for name in ("Vhs-prod", "Vhs-prod-Store", "Vhs-prod-Ingest", "Vhs-prod-ReadApi"):
        assert env_from_stacks(name, cloudformation) == expected


def test_an_unknown_stage_is_a_clear_error(cloudformation):
    with pytest.raises(ConfigurationError, match="no VHS stacks named Vhs-nope"):
        env_from_stacks("Vhs-nope-Store", cloudformation)


def test_stack_prefix():
    assert stack_prefix("Vhs-prod-Changes") == "Vhs-prod"
    assert stack_prefix("Vhs-prod") == "Vhs-prod"
