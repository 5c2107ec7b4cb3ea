"""The store: the body bucket, the index table, the staging bucket and the access-log bucket.

Everything here holds data, so everything takes RemovalPolicy.RETAIN, and the table also
takes deletion protection and point-in-time recovery. The table's key schema, billing mode
and stream come from `vhs.shapes.TABLE`, the definition the library and `vhs local up`
use.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from constructs import Construct

from vhs import shapes as vhs_shapes
from vhs.bodies import dictionaries

from . import nag, shapes

_ATTRIBUTE_TYPES = {
    "S": dynamodb.AttributeType.STRING,
    "N": dynamodb.AttributeType.NUMBER,
    "B": dynamodb.AttributeType.BINARY,
}


def object_arn(bucket: s3.IBucket, prefix: str) -> str:
    """ARN of every object under a key prefix ("" for the whole bucket): what a role's
    object-level statements name."""
    return bucket.arn_for_objects(f"{prefix.strip('/')}/*" if prefix.strip("/") else "*")


def dictionary_arn(bucket: s3.IBucket, body_prefix: str) -> str:
    """ARN of the store's zstd dictionaries (vhs/bodies/dictionaries.py), beside its body shards."""
    return object_arn(bucket, "/".join(filter(None, (body_prefix.strip("/"), dictionaries.FOLDER))))


def acknowledge_dictionary_reads(role: Construct, arn: str) -> None:
    """IAM5 for a role's GetObject of the store's dictionaries (`dictionary_arn`)."""
    nag.acknowledge_wildcard(
        role,
        arn,
        "GetObject of the store's zstd dictionaries only ({prefix}/_dictionaries/): each is "
        "named by its content's hash, published by the operator's `vhs dictionary train`, and "
        "found through the entries that name it, so their keys are not known in advance. Read "
        "only: no write, no delete, no list.",
    )


def _private_bucket(
    scope: Construct,
    id: str,
    *,
    expiry: s3.LifecycleRule,
    access_logs: s3.IBucket | None = None,
    **kwargs: object,
) -> s3.Bucket:
    """A bucket with the settings every VHS bucket shares: no public access, SSE-S3,
    TLS 1.2+ only, ACLs off, incomplete multipart uploads aborted, kept when its stack is
    deleted; `expiry`, its own lifecycle rule; access logs to `access_logs`, under
    ``<id in lower case>/``."""
    return s3.Bucket(
        scope,
        id,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        encryption=s3.BucketEncryption.S3_MANAGED,
        enforce_ssl=True,
        minimum_tls_version=1.2,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        removal_policy=cdk.RemovalPolicy.RETAIN,
        server_access_logs_bucket=access_logs,
        server_access_logs_prefix=f"{id.lower()}/" if access_logs else None,
        lifecycle_rules=[
            s3.LifecycleRule(
                id=vhs_shapes.BUCKET_ABORT_RULE_ID,
                abort_incomplete_multipart_upload_after=cdk.Duration.days(
                    vhs_shapes.BUCKET_ABORT_INCOMPLETE_MULTIPART_DAYS
                ),
            ),
            expiry,
        ],
        **kwargs,
    )


class Store(Construct):
    """Bucket and table of one VHS deployment (plus staging and access logs)."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        table_name: str | None = None,
        bucket_name: str | None = None,
        staging_bucket_name: str | None = None,
        access_log_bucket_name: str | None = None,
    ) -> None:
        """Names are optional: CloudFormation generates the ones left out."""
        super().__init__(scope, id)
        self.access_logs = self._access_log_bucket(access_log_bucket_name)
        self.bucket = self._body_bucket(bucket_name)
        self.staging = self._staging_bucket(staging_bucket_name)
        self.table = self._table(table_name)

    def _access_log_bucket(self, name: str | None) -> s3.Bucket:
        access_logs = _private_bucket(
            self,
            "AccessLogs",
            bucket_name=name,
            expiry=s3.LifecycleRule(
                id="expire-access-logs",
                expiration=cdk.Duration.days(shapes.ACCESS_LOG_EXPIRATION_DAYS),
            ),
        )
        # No logs of its own: it is the access-log target of the other buckets, which
        # cdk-nag's S1 recognises (logging it to itself would log every log delivery).
        nag.skip_checkov(
            access_logs,
            "CKV_AWS_18",
            "This is the access-log bucket, the target of the other buckets' server access "
            "logs: logging it to itself would log every log delivery, without end.",
        )
        nag.skip_checkov(
            access_logs,
            "CKV_AWS_21",
            "S3's logging service writes each access-log object once under a unique key and "
            "lifecycle expires it; nothing overwrites or deletes logs early, so versions would "
            "only hold copies of nothing.",
        )
        return access_logs

    def _body_bucket(self, name: str | None) -> s3.Bucket:
        return _private_bucket(
            self,
            "Bodies",
            bucket_name=name,
            versioned=True,
            access_logs=self.access_logs,
            expiry=s3.LifecycleRule(
                id="expire-noncurrent-bodies",
                noncurrent_version_expiration=cdk.Duration.days(
                    shapes.BUCKET_NONCURRENT_VERSION_DAYS
                ),
                expired_object_delete_marker=True,
            ),
        )

    def _staging_bucket(self, name: str | None) -> s3.Bucket:
        staging = _private_bucket(
            self,
            "Staging",
            bucket_name=name,
            access_logs=self.access_logs,
            # The rule `vhs local up` applies too (vhs_shapes.staging_expiry_rule).
            expiry=s3.LifecycleRule(
                id=vhs_shapes.STAGING_EXPIRY_RULE_ID,
                # The whole bucket: producers' payloads and the handler's dead letters.
                expiration=cdk.Duration.days(vhs_shapes.INGEST.staging_expiry_days),
            ),
        )
        nag.skip_checkov(
            staging,
            "CKV_AWS_21",
            "Staged payloads are transient claim checks, written once under producer-chosen "
            "unique keys, read by key, and expired by lifecycle; no VHS role may delete them, "
            "and a claim-check pointer names no version, so a noncurrent one is never read.",
        )
        return staging

    def _table(self, name: str | None) -> dynamodb.Table:
        shape = vhs_shapes.TABLE
        table = dynamodb.Table(
            self,
            "Records",
            table_name=name,
            partition_key=dynamodb.Attribute(
                name=shape.partition_key, type=_ATTRIBUTE_TYPES[shape.partition_key_type]
            ),
            billing_mode=getattr(dynamodb.BillingMode, shape.billing_mode),
            stream=getattr(dynamodb.StreamViewType, shape.stream_view_type),
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            deletion_protection=True,
            # The AWS managed key (aws/dynamodb) rather than the default AWS owned key: its use
            # shows in the account's CloudTrail, and AWS keeps it enabled for as long as the
            # table exists, so the retained table can never be cut off from its key.
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        table.add_global_secondary_index(
            index_name=shape.condemned_index,
            partition_key=dynamodb.Attribute(
                name=shape.condemned_index_key,
                type=_ATTRIBUTE_TYPES[shape.condemned_index_key_type],
            ),
            projection_type=dynamodb.ProjectionType.KEYS_ONLY,
        )
        nag.skip_checkov(
            table,
            "CKV_AWS_119",
            "Encrypted with the AWS managed key (aws/dynamodb), not a customer managed one: a "
            "key of our own would have to outlive this RETAIN table and its point-in-time "
            "backups (disabling or deleting it makes them unreadable) and be granted to every "
            "reader and the stream consumer, for no control that VHS needs.",
        )
        return table
