"""Every AWS client's attempts per call (vhs.aws.default_config): 11 by default, the first
included; AWS_MAX_ATTEMPTS, the SDKs' own variable, sets another number (1: no retries), and
a value that is not a whole number of at least 1 is refused, naming the variable."""

from __future__ import annotations

import pytest
from botocore.exceptions import EndpointConnectionError

from vhs import aws
from vhs.errors import ConfigurationError

# Nothing listens on the discard port: every attempt is refused at once.
UNREACHABLE = "http://127.0.0.1:9"


def attempts(monkeypatch: pytest.MonkeyPatch, max_attempts: str | None) -> int:
    """The requests one call makes to an endpoint that does not answer, before it raises."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", UNREACHABLE)
    if max_attempts is None:
        monkeypatch.delenv("AWS_MAX_ATTEMPTS", raising=False)
    else:
        monkeypatch.setenv("AWS_MAX_ATTEMPTS", max_attempts)
    monkeypatch.setattr(aws, "_session", None)  # read the environment anew
    client = aws.aws_client("dynamodb")
    sent: list[object] = []
    client.meta.events.register("before-send", lambda request, **_: sent.append(request))
    with pytest.raises(EndpointConnectionError):
        client.list_tables()
    return len(sent)


@pytest.mark.usefixtures("no_backoff")
@pytest.mark.parametrize(
    ("max_attempts", "expected"), [(None, aws.DEFAULT_MAX_ATTEMPTS), ("1", 1), ("3", 3)]
)
def test_a_call_makes_the_attempts_aws_max_attempts_gives(
    monkeypatch: pytest.MonkeyPatch, max_attempts: str | None, expected: int
) -> None:
    assert attempts(monkeypatch, max_attempts) == expected


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5"])
def test_aws_max_attempts_that_is_not_a_count_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", value)
    with pytest.raises(ConfigurationError, match=f"AWS_MAX_ATTEMPTS .*{value!r}"):
        aws.default_config()
