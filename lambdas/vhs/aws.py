"""AWS clients, their retry configuration, and what their errors mean.

Clients are built on botocore alone: importing boto3 costs about 200 ms, most of a Lambda cold
start, for nothing VHS uses. They are configured from the environment as boto3 would be
(credentials, region and the standard AWS_ENDPOINT_URL), so the same code runs against moto's
server or AWS.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

# S3 answers a missing object with NoSuchKey (GET), 404 or NotFound (HEAD, no body to carry a
# code), and a missing bucket with NoSuchBucket.
OBJECT_MISSING_CODES = frozenset({"NoSuchKey", "404", "NotFound"})
FORBIDDEN_CODES = frozenset({"AccessDenied", "403", "Forbidden"})
CONDITION_FAILED_CODES = frozenset({"ConditionalCheckFailedException"})


# Attempts per call, the first included, unless AWS_MAX_ATTEMPTS says otherwise.
DEFAULT_MAX_ATTEMPTS = 11


def default_config() -> Any:
    """Every client's configuration. AWS_MAX_ATTEMPTS, the SDKs' own variable, sets the attempts
    per call (the first included): botocore reads it only when the configuration names none,
    and this one does, so it is honoured here. A command against an endpoint that does not
    answer (a local stack that is not running) fails at once with 1, not after its backoff."""
    from botocore.config import Config

    from .settings import max_attempts

    attempts = max_attempts() or DEFAULT_MAX_ATTEMPTS
    # Standard retries back off on throttling and retry timeouts and 5xx responses.
    return Config(
        retries={"mode": "standard", "total_max_attempts": attempts},
        max_pool_connections=32,
        connect_timeout=5,
        read_timeout=30,
    )


_session: Any = None


def aws_client(service: str) -> Any:
    """A client of `service`, configured from the environment, with `default_config`."""
    global _session
    if _session is None:
        import botocore.session

        _session = botocore.session.get_session()
    config = default_config()
    if service == "s3":
        from botocore.config import Config

        # Presigned URLs (the read API's redirects) in SigV4: botocore would presign in SigV2
        # against a custom endpoint, which S3 refuses for new regions and with role sessions.
        config = config.merge(Config(signature_version="s3v4"))
    return _session.create_client(service, config=config)


def error_code(error: BaseException) -> str:
    """The AWS error code of a ClientError ("" for anything else)."""
    if isinstance(error, ClientError):
        return str(error.response.get("Error", {}).get("Code", ""))
    return ""


def is_object_missing(error: BaseException) -> bool:
    return error_code(error) in OBJECT_MISSING_CODES


def is_forbidden(error: BaseException) -> bool:
    """403: no permission, or (for a HEAD without s3:ListBucket) no such object."""
    return error_code(error) in FORBIDDEN_CODES


def is_key_denied(error: BaseException) -> bool:
    """S3 refused an object because of its KMS key (SSE-KMS under a key the caller may not
    use): permanent for that object, unlike a missing IAM permission, which a deploy fixes."""
    if not isinstance(error, ClientError):
        return False
    code = error_code(error)
    message = str(error.response.get("Error", {}).get("Message", "")).lower()
    return code.startswith("KMS.") or (code == "AccessDenied" and "kms" in message)


def is_condition_failed(error: BaseException) -> bool:
    return error_code(error) in CONDITION_FAILED_CODES
