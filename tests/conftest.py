from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from botocore.retries.standard import ExponentialBackoff

from vhs_testing.backends import BACKENDS, Backend, fake_credentials, live_enabled, open_backend

# Times every test and fails one over the budget's limit (vhs_testing/budget.py, tests/slow.txt).
pytest_plugins = ["vhs_testing.budget"]

# Fixtures that start a server (moto's, dynalite or `vhs local up`'s), and parameters that
# choose one.
SERVER_FIXTURES = frozenset({"moto_server", "dynalite_server", "server", "local_env"})


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--inprocess-only",
        action="store_true",
        help="run only tests that need no server (in-process moto): `make mutation` uses it",
    )


def needs_a_server(item: pytest.Item) -> bool:
    if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    params = getattr(getattr(item, "callspec", None), "params", {})
    return any(params.get(name, "inprocess") != "inprocess" for name in ("backend", "backend_name"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--inprocess-only"):
        return
    deselected = [item for item in items if needs_a_server(item)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if not needs_a_server(item)]


def pytest_configure(config: pytest.Config) -> None:
    # Unit and integration tests must never reach real AWS by accident.
    if not live_enabled():
        for name, value in fake_credentials().items():
            os.environ[name] = value
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
            os.environ.pop(name, None)


@pytest.fixture(scope="session")
def moto_server(request: pytest.FixtureRequest) -> Iterator[str]:
    from vhs_ops.local.stack import MotoServer

    if request.config.getoption("--inprocess-only"):
        pytest.skip("needs moto's server (--inprocess-only)")

    with MotoServer() as server:
        yield server.endpoint


@pytest.fixture(scope="session")
def dynalite_server(request: pytest.FixtureRequest) -> Iterator[str]:
    """dynalite in memory (make setup installs it): fails with how to install it if missing."""
    from vhs_testing.dynalite import DynaliteServer

    if request.config.getoption("--inprocess-only"):
        pytest.skip("needs dynalite (--inprocess-only)")

    with DynaliteServer() as server:
        yield server.endpoint


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    name = request.param
    if name == "live" and not live_enabled():
        pytest.skip("live AWS: set VHS_TEST_LIVE=1, VHS_TABLE_NAME and VHS_BUCKET_NAME")
    endpoint = request.getfixturevalue("moto_server") if name in ("server", "dynalite") else None
    dynamodb = request.getfixturevalue("dynalite_server") if name == "dynalite" else None
    with open_backend(name, endpoint, dynamodb) as opened:
        yield opened


@pytest.fixture
def inprocess() -> Iterator[Backend]:
    """Only in-process moto: for tests about our logic rather than about a backend."""
    with open_backend("inprocess", None) as opened:
        yield opened


@pytest.fixture
def server(moto_server: str) -> Iterator[Backend]:
    """moto's server over HTTP: for integration tests (and fault injection at the HTTP layer)."""
    with open_backend("server", moto_server) as opened:
        yield opened


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK still retries as configured, without sleeping between attempts (fault tests)."""
    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda self, context: 0)
