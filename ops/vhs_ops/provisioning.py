"""Creating the resources on a local or test AWS (moto, dynalite, an account of one's own):
what `vhs local up`, the tests and the benchmarks build. The deployed stacks are built by the
CDK from the same shapes (vhs.shapes), so what is created here is what is deployed; nothing in
the Lambda asset creates a resource, so none of this ships in it."""

from __future__ import annotations

from typing import Any

from vhs.shapes import INGEST, STAGING_EXPIRY_RULE_ID, TABLE
from vhs.shapes.staging import staging_expiry_rule
from vhs.shapes.store import abort_incomplete_uploads_rule


def create_table(dynamodb: Any, table_name: str) -> None:
    """Create the index table with the shared shape and wait until it is active."""
    dynamodb.create_table(**TABLE.create_table_kwargs(table_name))
    dynamodb.get_waiter("table_exists").wait(
        TableName=table_name, WaiterConfig={"Delay": 1, "MaxAttempts": 60}
    )


def create_bucket(s3: Any, bucket_name: str, region: str) -> None:
    """Create the body bucket with the shared settings."""
    kwargs: dict[str, Any] = {"Bucket": bucket_name}
    if region != "us-east-1":
        kwargs["CreateBucketConfiguration"] = {"LocationConstraint": region}
    s3.create_bucket(**kwargs)
    s3.put_public_access_block(
        Bucket=bucket_name,
        PublicAccessBlockConfiguration={
            "BlockPublicAcls": True,
            "IgnorePublicAcls": True,
            "BlockPublicPolicy": True,
            "RestrictPublicBuckets": True,
        },
    )
    s3.put_bucket_lifecycle_configuration(
        Bucket=bucket_name, LifecycleConfiguration={"Rules": [abort_incomplete_uploads_rule()]}
    )


def create_store_resources(
    dynamodb: Any, s3: Any, *, table_name: str, bucket_name: str, region: str
) -> None:
    """Create the table and bucket a `VersionedHybridStore` needs."""
    create_table(dynamodb, table_name)
    create_bucket(s3, bucket_name, region)


def create_staging_bucket(s3: Any, bucket_name: str, region: str) -> None:
    """Create the staging bucket: the body bucket's settings plus the expiry of staged
    objects. Never apply the expiry rule to the body bucket: it would expire bodies."""
    create_bucket(s3, bucket_name, region)
    rules = s3.get_bucket_lifecycle_configuration(Bucket=bucket_name)["Rules"]
    rules = [rule for rule in rules if rule.get("ID") != STAGING_EXPIRY_RULE_ID]
    s3.put_bucket_lifecycle_configuration(
        Bucket=bucket_name, LifecycleConfiguration={"Rules": [*rules, staging_expiry_rule()]}
    )


def create_change_topic(sns: Any, topic_name: str) -> str:
    """Create the change feed's SNS FIFO topic (local stack and tests); returns its ARN. The
    deployed topic is also KMS-encrypted and TLS-only (infra/changes.py)."""
    if not topic_name.endswith(".fifo"):
        raise ValueError("an SNS FIFO topic's name ends in .fifo")
    return sns.create_topic(
        Name=topic_name,
        Attributes={"FifoTopic": "true", "ContentBasedDeduplication": "false"},
    )["TopicArn"]


def subscribe_fifo_queue(sns: Any, sqs: Any, topic_arn: str, queue_name: str) -> str:
    """An SQS FIFO queue subscribed to the change topic with raw delivery (the message body
    is the notification itself); returns the queue URL. How a consumer listens, locally."""
    if not queue_name.endswith(".fifo"):
        raise ValueError("an SQS FIFO queue's name ends in .fifo")
    queue_url = sqs.create_queue(
        QueueName=queue_name,
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "false"},
    )["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    sns.subscribe(
        TopicArn=topic_arn,
        Protocol="sqs",
        Endpoint=queue_arn,
        Attributes={"RawMessageDelivery": "true"},
    )
    return queue_url


def create_ingest_queues(
    sqs: Any, *, queue_name: str, dlq_name: str, visibility_timeout: int | None = None
) -> tuple[str, str]:
    """Create the DLQ and the ingest queue with the shared shape; returns (queue, DLQ) URLs."""
    dlq_url = sqs.create_queue(QueueName=dlq_name, Attributes=INGEST.dlq_attributes())["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    attributes = INGEST.queue_attributes(dlq_arn, visibility_timeout=visibility_timeout)
    queue_url = sqs.create_queue(QueueName=queue_name, Attributes=attributes)["QueueUrl"]
    return queue_url, dlq_url
