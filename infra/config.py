"""Deployment configuration: read once from CDK context, then passed to constructs as props.

Constructs never read context or the environment themselves; `VhsConfig.from_context` is the
only place that does, and it validates every value so a typo fails at synth, not at deploy.

Context keys (``cdk deploy -c key=value`` or cdk.json):

==========================  ==================================================================
``stage``                   deployment name, lower-case letters, digits and ``-`` (default dev)
``alarmEmail``              address subscribed to the alarm topic (optional)
``logRetentionDays``        the function's log retention in days (default 30)
``oldestMessageAgeAlarmSeconds``  queue age alarm threshold (default from shapes.ALARMS)
``maxConcurrency``          the event source's maximum concurrency (default vhs_shapes.INGEST)
``bodyPrefix``              VHS_PREFIX of the deployed store (default "bodies")
``inlineThreshold``         VHS_INLINE_THRESHOLD (optional; the library's default otherwise)
``retainVersions``          VHS_RETAIN_VERSIONS (optional)
``retainDays``              VHS_RETAIN_DAYS (optional)
``retainAfterDeleteDays``   VHS_RETAIN_AFTER_DELETE_DAYS: days a deleted record's earlier
                            versions stay readable (optional; the library's default, 30)
``deltaHistory``            VHS_DELTA_HISTORY: "false" keeps earlier inline versions whole, one
                            blind request per put (optional; the library's default, true)
``logLevel``                LOG_LEVEL of the function (default INFO)
``powertoolsLayerArn``      an exact Powertools layer ARN (other partitions, or a pinned copy)
``powertoolsLayerVersion``  the layer version number, when not resolved from SSM (optional)
``ingestEventSource``       "false" leaves the SQS event source out (tests; default true)
``samLocal``                "true" synthesizes for ``sam local invoke`` (`make sam-synth`,
                            infra/sam.py): Powertools from a local layer, AWS_ENDPOINT_URL
                            declared; never deploy it (default false)
``gcSchedule``              the collector's EventBridge schedule (default vhs_shapes.GC)
``gcParallel``              invocations a collection run fans out over (default vhs_shapes.GC)
``gcGrace``                 VHS_GC_GRACE of the collector (default vhs_shapes.GC)
``importBucket``            an existing bucket the Import stack reads files from (under
                            imports/) and writes results to (default: the staging bucket)
``importConcurrency``       the import's Distributed Map MaxConcurrency (vhs_shapes.BULK_IMPORT)
``importChunkLines``        lines a chunk of the import holds (vhs_shapes.BULK_IMPORT)
==========================  ==================================================================
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from vhs import settings
from vhs import shapes as vhs_shapes

from . import shapes

# The AWS-managed Powertools for AWS Lambda (Python) v3 layer. Its version must match the
# aws-lambda-powertools pin in requirements.txt (a test checks): by default the stack resolves
# the layer ARN of exactly this release, in the stack's own region, from the public SSM
# parameter Powertools publishes, at deploy time. Nothing is looked up at synth time.
POWERTOOLS_VERSION = "3.37.0"
POWERTOOLS_LAYER_ACCOUNT = "017000801446"
# The newest Python the Powertools layer is built for (AWSLambdaPowertoolsPythonV3-python314-*).
LAMBDA_PYTHON_VERSION = "3.14"
LAMBDA_ARCHITECTURE = "arm64"

# The buckets of a deployment, by role. "vhs-" + 20-character stage + "-staging-" + account
# + "-" + the longest region name stays within S3's 63 characters.
BUCKET_ROLES = ("bodies", "staging", "logs")

_STAGE = re.compile(r"^[a-z][a-z0-9-]{0,19}$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_LAYER_ARN = re.compile(r"^arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:layer:[A-Za-z0-9_-]+:\d+$")
_BODY_PREFIX = re.compile(r"^[A-Za-z0-9!_.*'()-]*(/[A-Za-z0-9!_.*'()-]+)*$")
# CloudWatch Logs accepts only these retention periods.
LOG_RETENTION_DAYS = (
    1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557,
    2922, 3288, 3653,
)  # fmt: skip
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class ConfigError(ValueError):
    pass


def _matches(pattern: re.Pattern[str], value: str) -> bool:
    return pattern.match(value) is not None


def powertools_layer_name(
    python_version: str = LAMBDA_PYTHON_VERSION, architecture: str = LAMBDA_ARCHITECTURE
) -> str:
    return f"AWSLambdaPowertoolsPythonV3-python{python_version.replace('.', '')}-{architecture}"


def powertools_ssm_parameter(
    python_version: str = LAMBDA_PYTHON_VERSION,
    architecture: str = LAMBDA_ARCHITECTURE,
    version: str = POWERTOOLS_VERSION,
) -> str:
    """The public SSM parameter whose value is the layer ARN of one Powertools release."""
    return f"/aws/service/powertools/python/{architecture}/python{python_version}/{version}"


class _Context:
    """CDK context values as what they must be; ``get`` is ``node.try_get_context``."""

    def __init__(self, get: Any) -> None:
        self.get = get

    def text(self, key: str) -> str | None:
        """The value as text; None when it is unset or empty."""
        value = self.get(key)
        if value is None or value == "":
            return None
        return str(value)

    def number(self, key: str) -> int | None:
        value = self.text(key)
        if value is None:
            return None
        try:
            return int(value)
        except ValueError:
            raise ConfigError(f"context {key}={value!r} is not a whole number") from None

    def flag(self, key: str, default: bool) -> bool:
        value = self.text(key)
        if value is None:
            return default
        lowered = value.lower()
        if lowered not in ("true", "false"):
            raise ConfigError(f"context {key}={value!r}: use true or false")
        return lowered == "true"


@dataclass(frozen=True)
class VhsConfig:
    stage: str = "dev"
    alarm_email: str | None = None
    log_retention_days: int = 30
    body_prefix: str = shapes.DEPLOYED_BODY_PREFIX
    inline_threshold: int | None = None
    retain_versions: int | None = None
    retain_days: int | None = None
    retain_after_delete_days: int | None = None
    delta_history: bool | None = None
    dictionaries: bool | None = None
    log_level: str = "INFO"
    ingest: vhs_shapes.IngestShape = field(default_factory=lambda: vhs_shapes.INGEST)
    alarms: shapes.AlarmThresholds = field(default_factory=lambda: shapes.ALARMS)
    gc: vhs_shapes.GcShape = field(default_factory=lambda: vhs_shapes.GC)
    bulk_import: vhs_shapes.BulkImportShape = field(default_factory=lambda: vhs_shapes.BULK_IMPORT)
    # The bucket bulk imports read from and write results to; None: the staging bucket.
    import_bucket: str | None = None
    powertools_layer_arn: str | None = None
    powertools_layer_version: int | None = None
    # False leaves the SQS event source mapping out: moto's CloudFormation would otherwise
    # try to run the function in Docker on every send (see tests/infra/test_moto_deploy.py).
    ingest_event_source: bool = True
    # True: a template for `sam local invoke` only (infra/sam.py); never deployed.
    sam_local: bool = False

    def __post_init__(self) -> None:
        for ok, problem in self._checks():
            if not ok:
                raise ConfigError(problem)

    def _checks(self) -> Iterator[tuple[bool, str]]:
        """(holds, what is wrong otherwise), in order: the first that fails is reported."""
        yield (
            _matches(_STAGE, self.stage),
            f"stage {self.stage!r}: use 1-20 lower-case letters, digits and '-', "
            "starting with a letter",
        )
        yield (
            self.alarm_email is None or _matches(_EMAIL, self.alarm_email),
            f"alarmEmail {self.alarm_email!r} is not an email address",
        )
        yield (
            self.log_retention_days in LOG_RETENTION_DAYS,
            f"logRetentionDays {self.log_retention_days}: CloudWatch Logs accepts "
            f"{', '.join(map(str, LOG_RETENTION_DAYS))}",
        )
        yield (
            self.body_prefix == self.body_prefix.strip("/")
            and _matches(_BODY_PREFIX, self.body_prefix),
            f"bodyPrefix {self.body_prefix!r}: use S3-safe path segments",
        )
        # The collector's role may delete under the body prefix: an empty one would let it
        # delete anywhere in the bucket, whatever else the bucket holds.
        yield (
            self.body_prefix != "",
            'bodyPrefix "": the garbage collector would be allowed to delete anywhere in the '
            "bucket; give the bodies a prefix of their own (the default is "
            f"{shapes.DEPLOYED_BODY_PREFIX!r})",
        )
        yield (
            self.log_level in _LOG_LEVELS,
            f"logLevel {self.log_level!r}: one of {', '.join(_LOG_LEVELS)}",
        )
        for name in (
            "inline_threshold",
            "retain_versions",
            "retain_days",
            "retain_after_delete_days",
        ):
            value = getattr(self, name)
            yield value is None or value >= 0, f"{name} must not be negative"
        yield (
            self.powertools_layer_arn is None or _matches(_LAYER_ARN, self.powertools_layer_arn),
            f"powertoolsLayerArn {self.powertools_layer_arn!r} is not an ARN",
        )
        yield (
            self.powertools_layer_version is None or self.powertools_layer_version >= 1,
            "powertoolsLayerVersion must be a positive layer version",
        )

    @property
    def prefix(self) -> str:
        """Stack and resource name prefix: ``Vhs-<stage>``."""
        return f"Vhs-{self.stage}"

    # Physical names. The stateful resources are named, not generated: the stateless stack
    # derives their ARNs from these names (no cross-stack references, so either stack can be
    # replaced alone, and IAM policies read plainly); and a retained table or bucket can be
    # re-adopted by name (`cdk import`) rather than silently replaced by an empty twin.
    def physical_name(self, what: str) -> str:
        """``vhs-<stage>-<what>``: the fixed name of this deployment's `what`."""
        return f"vhs-{self.stage}-{what}"

    @property
    def table_name(self) -> str:
        return self.physical_name("records")

    def bucket_name(self, role: str, account: str, region: str) -> str:
        """``vhs-<stage>-<role>-<account>-<region>``: S3 names are global, so the account and
        region (CloudFormation pseudo parameters at synth time) make them unique."""
        if role not in BUCKET_ROLES:
            raise ConfigError(f"unknown bucket role {role!r}")
        return self.physical_name(f"{role}-{account}-{region}")

    def store_settings(self, table_name: str, bucket_name: str) -> settings.StoreSettings:
        """What a function is told of the store in `table_name` and `bucket_name`: those, and
        this configuration's body prefix, inline threshold and retention."""
        return settings.StoreSettings(
            table_name=table_name,
            bucket_name=bucket_name,
            prefix=self.body_prefix,
            inline_threshold=self.inline_threshold,
            retain_versions=self.retain_versions,
            retain_days=self.retain_days,
            retain_after_delete_days=self.retain_after_delete_days,
            delta_history=self.delta_history,
            dictionaries=self.dictionaries,
        )

    @classmethod
    def from_context(cls, get: Any) -> VhsConfig:
        """Build from CDK context; ``get`` is ``node.try_get_context``."""
        context = _Context(get)
        text, number, flag = context.text, context.number, context.flag

        # The shapes first (a context value replaces one field; the shape validates it), then
        # the plain settings.
        overrides: dict[str, Any] = {
            "ingest": vhs_shapes.INGEST,
            "alarms": shapes.ALARMS,
            "gc": vhs_shapes.GC,
            "bulk_import": vhs_shapes.BULK_IMPORT,
        }
        try:
            for read, key, shape, name in (
                (number, "maxConcurrency", "ingest", "max_concurrency"),
                (number, "oldestMessageAgeAlarmSeconds", "alarms", "oldest_message_age_seconds"),
                (text, "gcSchedule", "gc", "schedule_expression"),
                (number, "gcParallel", "gc", "parallel"),
                (text, "gcGrace", "gc", "grace"),
                (number, "importConcurrency", "bulk_import", "max_concurrency"),
                (number, "importChunkLines", "bulk_import", "chunk_lines"),
            ):
                if (value := read(key)) is not None:
                    overrides[shape] = dataclasses.replace(overrides[shape], **{name: value})
        except ValueError as error:
            raise ConfigError(str(error)) from None
        for read, key, name in (
            (number, "logRetentionDays", "log_retention_days"),
            (number, "inlineThreshold", "inline_threshold"),
            (number, "retainVersions", "retain_versions"),
            (number, "retainDays", "retain_days"),
            (number, "retainAfterDeleteDays", "retain_after_delete_days"),
            (number, "powertoolsLayerVersion", "powertools_layer_version"),
            (text, "stage", "stage"),
            (text, "alarmEmail", "alarm_email"),
            (text, "logLevel", "log_level"),
            (text, "powertoolsLayerArn", "powertools_layer_arn"),
            (text, "importBucket", "import_bucket"),
        ):
            if (value := read(key)) is not None:
                overrides[name] = value
        prefix = get("bodyPrefix")
        if prefix is not None:
            overrides["body_prefix"] = str(prefix)
        if text("deltaHistory") is not None:
            overrides["delta_history"] = flag("deltaHistory", True)
        if text("dictionaries") is not None:
            overrides["dictionaries"] = flag("dictionaries", False)
        return cls(
            ingest_event_source=flag("ingestEventSource", True),
            sam_local=flag("samLocal", False),
            **overrides,
        )
