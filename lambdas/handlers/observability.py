"""Powertools wiring shared by every VHS handler."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics.provider import cold_start

from vhs import settings
from vhs.settings import FunctionSpec

Handler = Callable[[dict[str, Any], Any], Any]
_T = TypeVar("_T")


class PerEnvironment(Generic[_T]):
    """`build()`'s result, built on first use (so that importing a handler stays cheap) and
    again whenever the variables that configure a function have changed since: in Lambda
    that is once per execution environment; where one process runs a handler against several
    stacks (`vhs local up`'s functions, `vhs invoke`, tests), once per stack, never a client
    of the stack before. Only the newest is kept."""

    def __init__(self, build: Callable[[], _T]) -> None:
        self.build = build
        self._built: tuple[tuple[tuple[str, str], ...], _T] | None = None
        self._lock = threading.Lock()
        functools.update_wrapper(self, build)

    def __call__(self) -> _T:
        configuration = settings.configuration_of()
        with self._lock:
            if self._built is None or self._built[0] != configuration:
                self._built = (configuration, self.build())
            return self._built[1]

    def cache_clear(self) -> None:
        """Build again at the next call, whatever the environment (functools.cache's name)."""
        with self._lock:
            self._built = None


def per_environment(build: Callable[[], _T]) -> PerEnvironment[_T]:
    return PerEnvironment(build)


def logger_and_metrics(function: FunctionSpec) -> tuple[Logger, Metrics]:
    """A handler's Logger and Metrics, named from the environment as deployed (the service
    name, else the function's own, and the metrics namespace)."""
    service = settings.get(settings.POWERTOOLS_SERVICE_NAME, function.service)
    return Logger(service=service), Metrics(namespace=settings.metrics_namespace())


def traced(handler: Handler) -> Handler:
    """`Tracer().capture_lambda_handler`, built on the first invocation and only where tracing
    is on. Importing aws_xray_sdk builds a botocore X-Ray client (about 120 ms here, before
    any work is done); with tracing off (locally, in tests, under SAM) that is pure
    cold-start cost, so it is never paid there."""
    wrapped: Handler | None = None

    @functools.wraps(handler)
    def invoke(event: dict[str, Any], context: Any) -> Any:
        nonlocal wrapped
        if wrapped is None:
            wrapped = (
                handler
                if Tracer._is_tracer_disabled()
                else Tracer().capture_lambda_handler(handler)
            )
        return wrapped(event, context)

    return invoke


def instrumented(
    logger: Logger, metrics: Metrics, *, capture_cold_start_metric: bool = False
) -> Callable[[Handler], Handler]:
    """How every VHS handler is wrapped: `traced`, its invocation's Lambda context in its log
    records (`logger.inject_lambda_context`), and its metrics flushed when it returns
    (`published`, with a ColdStart metric where `capture_cold_start_metric`)."""

    def wrap(handler: Handler) -> Handler:
        flushed = published(metrics, handler, capture_cold_start_metric=capture_cold_start_metric)
        return traced(logger.inject_lambda_context(flushed))

    return wrap


def published(
    metrics: Metrics, handler: Handler, *, capture_cold_start_metric: bool = False
) -> Handler:
    """`metrics.log_metrics(handler)`, but an invocation that recorded no metric publishes
    nothing, silently. Powertools' own flush warns then ("No application metrics to
    publish"), and an invocation may rightly record none: one that fails (a bad event, an
    unreachable table) or finds nothing to do. Each such warning went to the function's
    log and to every `vhs invoke` user's terminal, about 2,000 in a test run."""

    @functools.wraps(handler)
    def invoke(event: dict[str, Any], context: Any) -> Any:
        # As deployed, what the module read at its import; where a process runs the handler
        # for several stacks, each stack's own (see PerEnvironment).
        metrics.namespace = settings.metrics_namespace()
        try:
            response = handler(event, context)
            if capture_cold_start_metric and cold_start.is_cold_start:
                metrics.provider.add_cold_start_metric(context=context)
                cold_start.is_cold_start = False
        finally:
            if metrics.metric_set:
                metrics.flush_metrics()
        return response

    return invoke
