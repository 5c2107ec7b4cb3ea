"""Ingest: the queue producers send to, its dead-letter queue, and the function between the
queue and the store.

Queue and event-source settings come from `vhs.shapes.INGEST`, the definition the local
event-source emulator uses too. The function's role is written out statement by statement:
only the S3, DynamoDB and SQS actions the handler calls, on its own bucket prefix, staging
bucket, table and dead-letter queue. No Scan, no DeleteObject (deleted records leave their
bodies to the garbage collector), no wildcard actions.
"""

from __future__ import annotations

from typing import Unpack

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from vhs import settings, shapes

from . import nag
from .feature import StoreFeature, StoreWiring
from .function import allow, allow_listing
from .store import acknowledge_dictionary_reads, object_arn

DEAD_LETTER_STAGING_PREFIX = shapes.DEAD_LETTER_STAGING_PREFIX


def store_writer_statements(
    body_objects: str,
    dictionary_objects: str,
    staging: s3.IBucket,
    table: dynamodb.ITable,
    staged_objects: str,
) -> list[iam.PolicyStatement]:
    """What writing through the store takes, as ingest writes (and bulk import, which writes
    each line as ingest writes its message): bodies, staged payloads and the index."""
    return [
        # PutObject covers CreateMultipartUpload, UploadPart and CompleteMultipartUpload; a
        # failed multipart upload is aborted. The writer never reads bodies (no GetObject).
        allow("WriteBodies", ["s3:PutObject", "s3:AbortMultipartUpload"], [body_objects]),
        # The zstd dictionaries: the newest packs new bodies (VHS_DICTIONARIES), and any
        # one the current body was packed with decodes it for its delta. Read only.
        allow("ReadDictionaries", ["s3:GetObject"], [dictionary_objects]),
        allow("ReadStagedPayloads", ["s3:GetObject"], [staged_objects]),
        # Without ListBucket, S3 answers 403 for a missing object, which reads as a failure to
        # retry; with it, 404: an expired or absent payload is refused at once as
        # MissingStagedObject. Keys under the producers' prefix only (never dead-letters/ or
        # imports/), no contents.
        allow_listing("TellMissingPayloads", staging, shapes.STAGING_PREFIX),
        # UpdateItem writes; GetItem reads the item first (delta history, parts) and when a
        # refused condition returns none (a purge of an id with no item). No BatchGetItem, no
        # Query, no Scan.
        allow("ReadAndWriteIndex", ["dynamodb:GetItem", "dynamodb:UpdateItem"], [table.table_arn]),
    ]


class Ingest(StoreFeature):
    def __init__(
        self, scope: Construct, id: str, *, staging: s3.IBucket, **wiring: Unpack[StoreWiring]
    ) -> None:
        """Producers stage large payloads in `staging`; the function is told of the store what
        the collector is (`StoreWiring`). Ingest's alarms are the Monitoring construct's."""
        super().__init__(scope, id, **wiring)
        self.dead_letters, self.queue = self._queues()
        self._staging = staging
        self._staged_objects = object_arn(staging, shapes.STAGING_PREFIX)
        # Beside the producers' prefix, not under it: ingest never reads there.
        self._dead_letter_objects = object_arn(staging, DEAD_LETTER_STAGING_PREFIX)
        self._function()
        self.event_source: sources.SqsEventSource | None = None
        if self.config.ingest_event_source:
            self.event_source = self._event_source()
        self._acknowledge_wildcards()
        self._stage = self.config.stage
        # What every producer may do: send to the ingest queue and stage large payloads
        # anywhere under the producers' prefix (`producer_policy_for` gives one its own).
        self.producer_policy = self._producer_policy("ProducerPolicy", shapes.STAGING_PREFIX)

    def _queues(self) -> tuple[sqs.Queue, sqs.Queue]:
        """The dead-letter queue, and the ingest queue that redrives to it."""
        shape = self.config.ingest
        dead_letters = sqs.Queue(
            self,
            "DeadLetters",
            retention_period=cdk.Duration.seconds(shape.dlq_retention_seconds),
            max_message_size_bytes=shape.max_message_bytes,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )
        queue = sqs.Queue(
            self,
            "Queue",
            visibility_timeout=cdk.Duration.seconds(shape.visibility_timeout_seconds),
            retention_period=cdk.Duration.seconds(shape.queue_retention_seconds),
            max_message_size_bytes=shape.max_message_bytes,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=dead_letters, max_receive_count=shape.max_receive_count
            ),
        )
        return dead_letters, queue

    def _function(self) -> None:
        shape, staging = self.config.ingest, self._staging
        self.add_function(
            settings.INGEST_FUNCTION,
            does="stores the records sent to the ingest queue",
            role="ingest function: store writes only",
            statements=[
                *store_writer_statements(
                    self.body_objects,
                    self.dictionary_objects,
                    staging,
                    self.table,
                    self._staged_objects,
                ),
                allow("StageOversizedDeadLetters", ["s3:PutObject"], [self._dead_letter_objects]),
                allow(
                    "DeadLetterInvalidMessages", ["sqs:SendMessage"], [self.dead_letters.queue_arn]
                ),
            ],
            environment=settings.ingest_environment(
                self.store,
                dlq_url=self.dead_letters.queue_url,
                staging_bucket=staging.bucket_name,
                staging_prefix=shapes.STAGING_PREFIX,
            ),
            shape=shape,
            ephemeral_storage_size=cdk.Size.mebibytes(shape.function_ephemeral_storage_mb),
            no_dlq_reason=(
                "A function DLQ catches failed asynchronous invocations; this function is "
                "invoked synchronously by the SQS event source, and a message it fails stays "
                "in the queue until the queue's redrive policy moves it to the ingest DLQ."
            ),
        )

    def _event_source(self) -> sources.SqsEventSource:
        shape = self.config.ingest
        event_source = sources.SqsEventSource(
            self.queue,
            batch_size=shape.batch_size,
            max_batching_window=cdk.Duration.seconds(shape.max_batching_window_seconds),
            report_batch_item_failures=True,
            max_concurrency=shape.max_concurrency,
        )
        self.function.add_event_source(event_source)
        return event_source

    def _acknowledge_wildcards(self) -> None:
        nag.acknowledge_wildcard(
            self.role,
            self.body_objects,
            "Object-level access under the store's body prefix only: body keys are "
            "content-addressed ({prefix}/{shard}/{id}/{sha256}) and cannot be listed in "
            "advance. The actions are PutObject and AbortMultipartUpload; no GetObject, no "
            "DeleteObject, no List.",
        )
        acknowledge_dictionary_reads(self.role, self.dictionary_objects)
        nag.acknowledge_wildcard(
            self.role,
            self._staged_objects,
            "GetObject under the producers' prefix of the staging bucket (incoming/): "
            "producers stage claim-check payloads under keys they choose (SQS Extended Client "
            "UUIDs), and the handler reads only keys that a message points to there; never "
            "dead-letters/, the function's own.",
        )
        nag.acknowledge_wildcard(
            self.role,
            self._dead_letter_objects,
            "PutObject under dead-letters/ of the staging bucket only: an invalid message too "
            "large for the DLQ is staged there by its message id and dead-lettered as a "
            "claim check, and every dead letter's receipt is written there by the dead "
            "letter's message id (receipts/), which SQS assigns.",
        )

    def producer_policy_for(self, name: str) -> iam.ManagedPolicy:
        """A producer policy that stages under `incoming/<name>/` only, so that producers
        cannot overwrite each other's payloads (attach it instead of `producer_policy`, and
        set the producer's VHS_STAGING_PREFIX to the same prefix)."""
        if not name or not all(c.isalnum() or c in "-_." for c in name):
            raise ValueError(f"producer name {name!r}: letters, digits, '-', '_' and '.' only")
        return self._producer_policy(f"ProducerPolicy-{name}", f"{shapes.STAGING_PREFIX}{name}/")

    def _producer_policy(self, id: str, prefix: str) -> iam.ManagedPolicy:
        staged_objects = object_arn(self._staging, prefix)
        policy = iam.ManagedPolicy(
            self,
            id,
            description=f"Send records to VHS {self._stage}: attach to producer roles",
            statements=[
                iam.PolicyStatement(
                    sid="SendToIngestQueue",
                    actions=["sqs:SendMessage"],
                    resources=[self.queue.queue_arn],
                ),
                iam.PolicyStatement(
                    sid="StageLargePayloads",
                    actions=["s3:PutObject", "s3:AbortMultipartUpload"],
                    resources=[staged_objects],
                ),
                # dead-letters/ is the ingest function's: staged dead letters and the receipts
                # that make their reasons believed (vhs.ingest.deadletter). A producer that
                # could write there could vouch for a reason of its own. Outside the prefix
                # above already; denied too, so no other grant a producer holds can allow it.
                iam.PolicyStatement(
                    sid="NeverWriteDeadLetters",
                    effect=iam.Effect.DENY,
                    actions=["s3:PutObject", "s3:AbortMultipartUpload"],
                    resources=[self._dead_letter_objects],
                ),
            ],
        )
        nag.acknowledge_wildcard(
            policy,
            staged_objects,
            f"Producers put claim-check payloads under the staging bucket's {prefix} under "
            "keys they choose (SQS Extended Client UUIDs); PutObject and "
            "AbortMultipartUpload only, and staged objects expire by lifecycle.",
        )
        return policy
