"""Configuration from a deployed VHS stage: the CLI's `--stack NAME`.

The CDK app deploys a stage as sibling stacks, `<prefix>-Store`, `<prefix>-Ingest`,
`<prefix>-Changes`, `<prefix>-Maintenance` and `<prefix>-Reindex` (prefix `Vhs-<stage>`).
`--stack` takes the prefix or any one of the stack names, reads every sibling's outputs with
CloudFormation DescribeStacks, and turns them into the environment variables the library
reads, so the CLI works against a deployment with nothing but AWS credentials.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from vhs import settings
from vhs.errors import ConfigurationError

STACK_SUFFIXES = ("Store", "Ingest", "Changes", "Maintenance", "ReadApi", "Reindex", "Import")

# Stack output -> environment variable.
OUTPUT_ENV = {
    "TableName": settings.TABLE_NAME,
    "BucketName": settings.BUCKET_NAME,
    "BodyPrefix": settings.PREFIX,
    "StagingBucketName": settings.STAGING_BUCKET,
    "QueueUrl": settings.QUEUE_URL,
    "DeadLetterQueueUrl": settings.DLQ_URL,
    "ChangeTopicArn": settings.CHANGE_TOPIC_ARN,
    "ChangeDeadLetterQueueUrl": settings.CHANGE_DLQ_URL,
    "ReindexStateMachineArn": settings.REINDEX_STATE_MACHINE_ARN,
    "ReadApiUrl": settings.READ_API_URL,
}


def stack_prefix(name: str) -> str:
    for suffix in STACK_SUFFIXES:
        if name.endswith(f"-{suffix}"):
            return name[: -len(suffix) - 1]
    return name


def env_from_stacks(name: str, cloudformation: Any = None) -> dict[str, str]:
    """The VHS environment of the stage that stack `name` (or prefix `name`) belongs to."""
    if cloudformation is None:
        from vhs.aws import aws_client

        cloudformation = aws_client("cloudformation")
    prefix = stack_prefix(name)
    env: dict[str, str] = {}
    found = []
    for suffix in STACK_SUFFIXES:
        stack = f"{prefix}-{suffix}"
        try:
            described = cloudformation.describe_stacks(StackName=stack)["Stacks"]
        except ClientError as error:
            if "does not exist" in str(error):
                continue
            raise
        found.append(stack)
        for output in described[0].get("Outputs", []):
            variable = OUTPUT_ENV.get(output["OutputKey"])
            if variable and output.get("OutputValue") not in (None, ""):
                value = output["OutputValue"]
                # A function URL ends in "/"; VHS_READ_API_URL is joined with "/records/...",
                # and "//records" would be another path.
                env[variable] = value.rstrip("/") if variable == settings.READ_API_URL else value
    if not found:
        raise ConfigurationError(
            f"no VHS stacks named {prefix}-{{{','.join(STACK_SUFFIXES)}}} in this account "
            "and region (check --stack and AWS_REGION)"
        )
    return env
