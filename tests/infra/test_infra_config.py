"""Configuration from context, and the shared shapes the constructs and the local stack read."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from infra import VhsConfig, shapes
from infra.config import (
    BUCKET_ROLES,
    LOG_RETENTION_DAYS,
    POWERTOOLS_VERSION,
    ConfigError,
    powertools_layer_name,
    powertools_ssm_parameter,
)
from vhs import shapes as vhs_shapes
from vhs_ops import provisioning

ROOT = Path(__file__).resolve().parents[2]


def config(**context: object) -> VhsConfig:
    return VhsConfig.from_context(context.get)


def test_defaults() -> None:
    c = config()
    assert c.stage == "dev"
    assert c.alarm_email is None
    assert c.log_retention_days == 30
    assert c.ingest == vhs_shapes.INGEST
    assert c.alarms == shapes.ALARMS
    assert c.ingest_event_source is True
    assert c.prefix == "Vhs-dev"
    assert c.table_name == "vhs-dev-records"


def test_context_overrides() -> None:
    c = config(
        stage="prod",
        alarmEmail="oncall@example.com",
        logRetentionDays="90",
        maxConcurrency="50",
        oldestMessageAgeAlarmSeconds=300,
        retainVersions="3",
        ingestEventSource="false",
        powertoolsLayerVersion="42",
    )
    assert (c.stage, c.alarm_email, c.log_retention_days) == ("prod", "oncall@example.com", 90)
    assert c.ingest.max_concurrency == 50
    assert c.alarms.oldest_message_age_seconds == 300
    assert c.retain_versions == 3
    assert c.ingest_event_source is False
    assert c.powertools_layer_version == 42


def test_retention_after_delete_flows_from_context_to_the_store() -> None:
    from datetime import timedelta

    from vhs import VersionedHybridStore, settings

    store_settings = config(retainAfterDeleteDays="7").store_settings("table", "bucket")
    env = store_settings.environment()
    assert env[settings.RETAIN_AFTER_DELETE_DAYS] == "7"
    assert settings.RETAIN_AFTER_DELETE_DAYS == "VHS_RETAIN_AFTER_DELETE_DAYS"
    assert settings.StoreSettings.from_env(env) == store_settings
    store = VersionedHybridStore.from_settings(
        settings.StoreSettings.from_env(env), s3_client=object(), dynamodb_client=object()
    )
    assert store.retention.after_delete == timedelta(days=7)
    assert store.retention.versions == 5  # the others keep the library's defaults
    # Unset: the library's documented default, 30 days.
    assert settings.RETAIN_AFTER_DELETE_DAYS not in config().store_settings("t", "b").environment()
    default = VersionedHybridStore.from_settings(
        config().store_settings("t", "b"), s3_client=object(), dynamodb_client=object()
    )
    assert default.retention.after_delete == timedelta(days=30)
    with pytest.raises(ConfigError, match="retain_after_delete_days"):
        config(retainAfterDeleteDays="-1")


def test_delta_history_flows_from_context_to_the_store() -> None:
    from vhs import VersionedHybridStore, settings

    off = config(deltaHistory="false").store_settings("table", "bucket")
    assert off.environment()[settings.DELTA_HISTORY] == "false"
    store = VersionedHybridStore.from_settings(
        settings.StoreSettings.from_env(off.environment()),
        s3_client=object(),
        dynamodb_client=object(),
    )
    assert store.delta_history is False
    # Unset: the library's default (on), and nothing in the functions' environment.
    assert settings.DELTA_HISTORY not in config().store_settings("t", "b").environment()
    with pytest.raises(ConfigError, match="deltaHistory"):
        config(deltaHistory="sometimes")


def test_dictionaries_flow_from_context_to_the_store() -> None:
    from vhs import VersionedHybridStore, settings

    on = config(dictionaries="true").store_settings("table", "bucket")
    assert on.environment()[settings.DICTIONARIES] == "true"
    store = VersionedHybridStore.from_settings(
        settings.StoreSettings.from_env(on.environment()),
        s3_client=object(),
        dynamodb_client=object(),
    )
    assert store.write_dictionaries is True
    # Unset: the library's default (off), and nothing in the functions' environment.
    assert settings.DICTIONARIES not in config().store_settings("t", "b").environment()
    with pytest.raises(ConfigError, match="dictionaries"):
        config(dictionaries="sometimes")


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"stage": "Prod"}, "stage"),
        ({"stage": "a" * 21}, "stage"),
        ({"alarmEmail": "nobody"}, "alarmEmail"),
        ({"logRetentionDays": "31"}, "logRetentionDays"),
        ({"logRetentionDays": "thirty"}, "whole number"),
        ({"maxConcurrency": "1"}, "maximum concurrency"),
        ({"ingestEventSource": "maybe"}, "true or false"),
        ({"logLevel": "LOUD"}, "logLevel"),
        ({"bodyPrefix": "/bodies/"}, "bodyPrefix"),
        ({"bodyPrefix": ""}, "delete anywhere in the bucket"),
        ({"powertoolsLayerArn": "layer"}, "powertoolsLayerArn"),
    ],
)
def test_bad_context_fails_at_synth(context: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config(**context)


def test_bucket_names_fit_s3s_limit_for_the_longest_stage_and_region() -> None:
    c = config(stage="s" * 20)
    for role in BUCKET_ROLES:
        name = c.bucket_name(role, "123456789012", "ap-southeast-5")
        assert len(name) <= 63, name
        assert re.fullmatch(r"[a-z0-9][a-z0-9-]*[a-z0-9]", name)


def test_log_retention_choices_match_the_constructs() -> None:
    from infra.function import LOG_RETENTION as _RETENTION

    assert set(_RETENTION) == set(LOG_RETENTION_DAYS)


def test_powertools_layer_matches_the_pinned_package() -> None:
    pins = (ROOT / "requirements.txt").read_text()
    assert f"aws-lambda-powertools=={POWERTOOLS_VERSION}" in pins
    assert powertools_layer_name() == "AWSLambdaPowertoolsPythonV3-python314-arm64"
    assert powertools_ssm_parameter().endswith(f"/python3.14/{POWERTOOLS_VERSION}")


def test_cdk_json_turns_off_notices_and_telemetry_and_runs_the_venv() -> None:
    cdk_json = json.loads((ROOT / "cdk.json").read_text())
    assert cdk_json["notices"] is False
    assert cdk_json["context"]["cli-telemetry"] is False
    assert cdk_json["app"].startswith(".venv/bin/python ")
    package = json.loads((ROOT / "package.json").read_text())
    assert re.fullmatch(r"2\.\d+\.\d+", package["devDependencies"]["aws-cdk"])


# --- the shared ingest shape --------------------------------------------------------------------


def test_ingest_shape_follows_aws_guidance() -> None:
    shape = vhs_shapes.INGEST
    assert shape.visibility_timeout_seconds >= 6 * shape.function_timeout_seconds
    assert shape.max_receive_count == 5
    assert shape.dlq_retention_seconds == 14 * 24 * 3600
    assert shape.queue_retention_seconds < shape.dlq_retention_seconds
    assert 2 <= shape.max_concurrency <= 1000


@pytest.mark.parametrize(
    "change",
    [
        {"visibility_timeout_seconds": 359},
        {"max_receive_count": 4},
        {"dlq_retention_seconds": 15 * 24 * 3600},
        {"queue_retention_seconds": 14 * 24 * 3600},
        {"max_concurrency": 1},
        {"batch_size": 100, "max_batching_window_seconds": 0},
    ],
)
def test_ingest_shape_refuses_unsafe_settings(change: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="invalid ingest shape"):
        dataclasses.replace(vhs_shapes.INGEST, **change)


def test_queue_attributes_redrive_to_the_dlq_after_max_receive_count() -> None:
    """The helper the local stack uses makes queues that dead-letter like the deployed ones."""
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        queue_url, dlq_url = provisioning.create_ingest_queues(
            sqs, queue_name="ingest", dlq_name="ingest-dlq"
        )
        attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])[
            "Attributes"
        ]
        assert attributes["VisibilityTimeout"] == "360"
        assert json.loads(attributes["RedrivePolicy"])["maxReceiveCount"] == 5
        sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"VisibilityTimeout": "0"})
        sqs.send_message(QueueUrl=queue_url, MessageBody="{}")
        for _ in range(vhs_shapes.INGEST.max_receive_count):
            assert sqs.receive_message(QueueUrl=queue_url).get("Messages")
        assert not sqs.receive_message(QueueUrl=queue_url).get("Messages")
        assert sqs.receive_message(QueueUrl=dlq_url).get("Messages")


def test_the_handler_stages_dead_letters_where_the_ingest_role_may_write() -> None:
    """Drift guard: the role's PutObject on the staging bucket covers only dead-letters/."""
    from infra.ingest import DEAD_LETTER_STAGING_PREFIX
    from vhs.ingest.contract import InvalidMessage, StagingLocation
    from vhs.ingest.ingestor import MAX_MESSAGE_BYTES, Ingestor

    class Recorder:
        def __init__(self) -> None:
            self.calls: list[dict[str, object]] = []

        def put_object(self, **kwargs: object) -> None:
            self.calls.append(kwargs)

        def send_message(self, **kwargs: object) -> dict[str, str]:
            self.calls.append(kwargs)
            return {"MessageId": "dead-1"}

    s3, sqs = Recorder(), Recorder()
    ingestor = Ingestor(
        None,  # type: ignore[arg-type]  # dead-lettering never touches the store
        sqs_client=sqs,
        dlq_url="https://sqs.example/dlq",
        staging=StagingLocation("staging", vhs_shapes.STAGING_PREFIX),
        s3_client=s3,
    )
    record = {"messageId": "m-1", "body": "x" * (MAX_MESSAGE_BYTES + 1)}
    ingestor.dead_letter(record, InvalidMessage("body", "too large"))
    # The staged dead letter, then its receipt: both where the role may write.
    staged, receipt = s3.calls
    for put in (staged, receipt):
        assert str(put["Key"]).startswith(DEAD_LETTER_STAGING_PREFIX)
        assert not str(put["Key"]).startswith(vhs_shapes.STAGING_PREFIX)  # ingest never reads
    assert str(receipt["Key"]).endswith("/dead-1")
