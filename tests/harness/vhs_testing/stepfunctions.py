"""The Import and Reindex state machines, executed: their definitions as the CDK app synthesizes
them, run by moto's own Step Functions interpreter (moto/stepfunctions/parser, derived from
LocalStack's) in process, each Lambda Task calling our real handler in this process.

What a test gets (`StateMachines`): `run(input)` starts an execution of the synthesized state
machine and returns it finished (its status, output, error and cause), `waits` the Retry waits
it asked for (recorded, not slept), and `result_files(bucket, prefix)` the ResultWriter's files.

A Lambda Task is routed (`lambda_eval_utils._invoke_lambda_function`, where the interpreter
calls Lambda) to the function's handler, with the function's environment from the template
(CloudFormation tokens resolved to the names this harness gives the resources), a context whose
remaining time counts down from the function's configured Timeout, and an exception returned as
Lambda returns it: FunctionError "Unhandled" and a payload with `errorType` (the exception's
class name) and `errorMessage`, so Retry and Catch match as on AWS.

Where moto 5.2.5's interpreter falls short of what our templates use, this module adapts it:
`ADAPTATIONS` names each adaptation and why. Each is either a rewrite of the definition before
moto parses it (`_lower`) or a narrow patch of one moto function (`_patches`); the patches are
written against `PATCHED_MOTO_VERSION` and refuse to install on another release, so an upgrade
fails loudly here rather than running on a stale copy.

Not modelled (the live-AWS tests' part): a handler is never cut off at its timeout (the
context only reports the time left), IAM, redrive, the 25,000-event history, Express
children, and the 256 KiB limits beyond moto's own check of a Lambda result. Child executions
are not executions of their own (moto runs a Map's items inside the parent), and the
ResultWriter's files hold each child's Input, Output or Error and Cause and Status, not every
field AWS writes.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import functools
import json
import os
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from vhs_ops.local.invoke import LambdaContext

PATCHED_MOTO_VERSION = "5.2.5"
ACCOUNT = "123456789012"
REGION = "us-east-1"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/vhs-state-machine"

# Every adaptation of moto's interpreter to what our templates use, and why. A test asserts this
# list, so adding or dropping one is a visible change.
ADAPTATIONS: tuple[tuple[str, str], ...] = (
    (
        "lambda-in-process",
        "moto's Lambda would run the function in Docker: the Task calls our handler in this "
        "process, with the template's environment, a countdown context, Lambda's error payload",
    ),
    (
        "execution-inline",
        "StartExecution runs the execution to its end before it returns (moto runs it in a "
        "thread): a test reads the finished execution without polling or sleeping",
    ),
    (
        "retry-waits-recorded",
        "a Retrier sleeps IntervalSeconds x BackoffRate^n (30 s, 2 min...): the waits are "
        "recorded for the test to assert, not slept",
    ),
    (
        "retry-count-per-state-entry",
        "moto keeps a Retrier's attempt count in the frame for the whole child, so a state "
        "entered again (the reindex loop) inherits earlier entries' attempts; on AWS each entry "
        "of a state counts its retries afresh",
    ),
    (
        "itemreader-jsonl",
        "moto's ItemReader knows only JSON and CSV: a JSONL reader reads one item a line",
    ),
    (
        "itembatcher",
        "moto's grammar has no ItemBatcher: it is rewritten as an ItemSelector giving each child "
        "{'Items': [item], 'BatchInput': ...} (MaxItemsPerBatch 1 only; others are refused)",
    ),
    (
        "tolerated-failure",
        "moto parses ToleratedFailurePercentage/Count but never applies them (a Map Run with "
        "failed children succeeds), and its grammar refuses a whole-number percentage: the "
        "Map Run fails with States.ExceedToleratedFailureThreshold as AWS's does",
    ),
    (
        "parse-once",
        "moto parses a definition with ANTLR at CreateStateMachine and again at every "
        "StartExecution (about 0.2 s each): a definition is parsed once a process, its "
        "program (declarations only; each run's state is in its Environment) reused",
    ),
    (
        "resultwriter-files",
        "moto's ResultWriter writes only an empty manifest.json: it writes SUCCEEDED_0.json and "
        "FAILED_0.json with each child's input, output or error and cause, also when the Map "
        "Run fails, as AWS does",
    ),
)


# --- the templates ----------------------------------------------------------------------------


def resolve(value: Any, names: Mapping[str, str]) -> Any:
    """A CloudFormation value with its Ref, Fn::GetAtt (Arn) and Fn::Join resolved: `names`
    maps a logical id (or pseudo parameter, or SSM parameter) to what this harness calls it."""
    if isinstance(value, dict):
        if "Ref" in value:
            return names[value["Ref"]]
        if "Fn::GetAtt" in value:
            logical, attribute = value["Fn::GetAtt"]
            return names[f"{logical}.{attribute}"]
        if "Fn::Join" in value:
            separator, parts = value["Fn::Join"]
            return separator.join(str(resolve(part, names)) for part in parts)
        if "Fn::Sub" in value:
            raise ValueError(f"Fn::Sub is not resolved here: {value}")
        return {k: resolve(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, names) for v in value]
    return value


def pseudo_parameters() -> dict[str, str]:
    return {"AWS::AccountId": ACCOUNT, "AWS::Region": REGION, "AWS::Partition": "aws"}


@dataclass(frozen=True)
class Function:
    """One Lambda function of a template: its handler, timeout and (resolved) environment."""

    logical_id: str
    name: str
    handler: str
    timeout_seconds: int
    memory_mb: int
    environment: dict[str, str]

    @property
    def arn(self) -> str:
        return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.name}"


@dataclass(frozen=True)
class Machine:
    """A state machine of a template: its definition with every token resolved."""

    name: str
    definition: dict[str, Any]
    functions: dict[str, Function]  # by ARN


def machine_of(template: dict[str, Any], extra_names: Mapping[str, str] | None = None) -> Machine:
    """The template's one state machine and the functions its definition invokes. A function
    is named by its logical id; `extra_names` resolves the template's other references (its SSM
    parameters, by the parameter's name in SSM: e.g. {"/vhs/test/change-topic-arn": ARN})."""
    resources = template["Resources"]
    names: dict[str, str] = dict(pseudo_parameters())
    for logical, parameter in template.get("Parameters", {}).items():
        default = parameter.get("Default")
        if extra_names and default in extra_names:
            names[logical] = extra_names[default]
    specs = {k: v for k, v in resources.items() if v["Type"] == "AWS::Lambda::Function"}
    for logical in specs:
        names[f"{logical}.Arn"] = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{logical}"
    (machine,) = [v for v in resources.values() if v["Type"] == "AWS::StepFunctions::StateMachine"]
    properties = machine["Properties"]
    definition = json.loads(resolve(properties["DefinitionString"], names))
    functions = {}
    for logical, spec in specs.items():
        props = spec["Properties"]
        variables = props.get("Environment", {}).get("Variables", {})
        function = Function(
            logical,
            logical,
            props["Handler"],
            props["Timeout"],
            props["MemorySize"],
            {k: str(resolve(v, names)) for k, v in variables.items()},
        )
        functions[function.arn] = function
    return Machine(properties["StateMachineName"], definition, functions)


# --- the definition, lowered to what moto parses ----------------------------------------------


def _lower(definition: dict[str, Any]) -> dict[str, Any]:
    """The definition as moto 5.2.5's grammar takes it (see ADAPTATIONS)."""
    lowered = copy.deepcopy(definition)

    def visit(states: dict[str, Any]) -> None:
        for state in states.values():
            if state.get("Type") != "Map":
                continue
            batcher = state.pop("ItemBatcher", None)
            if batcher is not None:
                if batcher.get("MaxItemsPerBatch", 1) != 1 or set(batcher) - {
                    "MaxItemsPerBatch",
                    "BatchInput",
                }:
                    raise NotImplementedError(f"ItemBatcher {batcher}: only MaxItemsPerBatch 1")
                if "ItemSelector" in state:
                    raise NotImplementedError("ItemBatcher with an ItemSelector")
                state["ItemSelector"] = {
                    "Items.$": "States.Array($$.Map.Item.Value)",
                    "BatchInput": batcher.get("BatchInput", {}),
                }
            # moto's grammar takes a percentage only as a decimal number ("10.0", not "10").
            # A threshold left out does not apply when the other is given (AWS fails the Map
            # Run once a given one is exceeded; with neither, any failure fails it).
            if "ToleratedFailurePercentage" in state:
                state["ToleratedFailurePercentage"] = float(state["ToleratedFailurePercentage"])
                state.setdefault("ToleratedFailureCount", _NO_LIMIT)
            elif "ToleratedFailureCount" in state:
                state["ToleratedFailurePercentage"] = 100.0
            visit(state["ItemProcessor"]["States"])

    visit(lowered["States"])
    return lowered


_NO_LIMIT = 99_999_999  # moto's largest count


# --- the run ----------------------------------------------------------------------------------


@dataclass
class Execution:
    """A finished execution: as DescribeExecution answers, its output and input parsed."""

    arn: str
    name: str
    status: str
    input: Any
    output: Any
    error: str | None
    cause: str | None


@dataclass
class Invocation:
    """One Lambda invocation a Task made: the function, the event, and how it ended."""

    function: str
    event: Any
    result: Any = None
    error_type: str | None = None


@dataclass
class Recorder:
    """What the executions did that a test asserts: the invocations and the Retry waits."""

    invocations: list[Invocation] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)
    map_children: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class CountdownFromTimeout(LambdaContext):
    """Lambda's context: the time left counts down from the function's configured timeout by
    `clock` (a test may pass a clock that runs faster than time)."""

    def __init__(self, function: Function, clock: Callable[[], float]) -> None:
        super().__init__(
            function_name=function.name,
            memory_limit_in_mb=function.memory_mb,
            timeout_seconds=function.timeout_seconds,
        )
        self._clock = clock
        self._deadline = clock() + function.timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - self._clock()) * 1000))


def lambda_error_payload(error: BaseException) -> dict[str, Any]:
    """What Lambda returns for a Python handler that raised (FunctionError "Unhandled")."""
    return {
        "errorType": type(error).__name__,
        "errorMessage": str(error),
        "requestId": str(uuid.uuid4()),
        "stackTrace": traceback.format_tb(error.__traceback__),
    }


class StateMachines:
    """Runs one synthesized state machine on moto's interpreter (inside `mock_aws` with
    execute_state_machine). Create it with `installed(...)`."""

    def __init__(
        self,
        machine: Machine,
        handlers: Mapping[str, Callable[[Any, Any], Any]],
        recorder: Recorder,
        clock: Callable[[], float],
    ) -> None:
        self.machine = machine
        self.handlers = handlers
        self.recorder = recorder
        self.clock = clock
        self.sfn = client("stepfunctions")
        self.arn = self.sfn.create_state_machine(
            name=machine.name,
            definition=json.dumps(_lower(machine.definition)),
            roleArn=ROLE_ARN,
            type="STANDARD",
        )["stateMachineArn"]

    @property
    def waits(self) -> list[float]:
        return list(self.recorder.waits)

    @property
    def invocations(self) -> list[Invocation]:
        return list(self.recorder.invocations)

    def invoke(self, function_arn: str, payload: Any) -> dict[str, Any]:
        """A Lambda invocation as the Task makes it: the response Lambda's Invoke answers."""
        function = self.machine.functions[function_arn]
        event = json.loads(payload) if isinstance(payload, bytes | str) else payload
        call = Invocation(function.name, copy.deepcopy(event))
        with self.recorder.lock:
            self.recorder.invocations.append(call)
        context = CountdownFromTimeout(function, self.clock)
        try:
            result = self.handlers[function.handler](event, context)
        except Exception as error:  # what Lambda does with any exception a handler raises
            call.error_type = type(error).__name__
            return {
                "StatusCode": 200,
                "FunctionError": "Unhandled",
                "Payload": lambda_error_payload(error),
            }
        # Through JSON, as Lambda serializes it.
        call.result = json.loads(json.dumps(result))
        return {"StatusCode": 200, "Payload": call.result}

    def run(self, execution_input: Any, name: str | None = None) -> Execution:
        name = name or f"run-{uuid.uuid4().hex[:12]}"
        started = self.sfn.start_execution(
            stateMachineArn=self.arn, name=name, input=json.dumps(execution_input)
        )
        described = self.sfn.describe_execution(executionArn=started["executionArn"])
        output = described.get("output")
        return Execution(
            described["executionArn"],
            described["name"],
            described["status"],
            json.loads(described["input"]),
            json.loads(output) if output is not None else None,
            described.get("error"),
            described.get("cause"),
        )


# --- the patches ------------------------------------------------------------------------------


def _check_moto_version() -> None:
    import moto

    if moto.__version__ != PATCHED_MOTO_VERSION:
        raise RuntimeError(
            f"vhs_testing/stepfunctions.py adapts moto {PATCHED_MOTO_VERSION}'s Step Functions "
            f"interpreter, not {moto.__version__}: check each of ADAPTATIONS against the new "
            "release (drop what it now does itself) and update PATCHED_MOTO_VERSION"
        )


_active: StateMachines | None = None
# Parsed definitions (parse-once), by their text.
_parsed: dict[str, Any] = {}
_parsed_lock = threading.Lock()
_install_lock = threading.Lock()


def _patches(recorder: Recorder) -> list[tuple[Any, str, Any]]:
    """(owner, attribute, replacement) for every patched moto name (see ADAPTATIONS)."""
    from moto.stepfunctions.parser.api import HistoryEventType, MapRunFailedEventDetails
    from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
        FailureEvent,
        FailureEventException,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import (
        StatesErrorName,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
        StatesErrorNameType,
    )
    from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl
    from moto.stepfunctions.parser.asl.component.state.exec import execute_state
    from moto.stepfunctions.parser.asl.component.state.exec.state_map import state_map
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.item_reader import (
        item_reader_decl,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.item_reader.eval.resource_output_transformer import (  # noqa: E501
        transformer_factory,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.item_reader.eval.resource_output_transformer.transformer import (  # noqa: E501
        ResourceOutputTransformer,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.item_reader.reader_config import (  # noqa: E501
        input_type,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration import (
        distributed_iteration_component as iteration,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.itemprocessor import (  # noqa: E501
        distributed_item_processor_worker as item_worker,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.result_writer.resource_eval import (  # noqa: E501
        resource_eval_s3,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils
    from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails
    from moto.stepfunctions.parser.asl.parse import asl_parser
    from moto.stepfunctions.parser.backend import execution_worker

    # parse-once
    original_parse = asl_parser.AmazonStateLanguageParser.parse

    def parse_once(definition: str) -> Any:
        with _parsed_lock:
            if definition not in _parsed:
                _parsed[definition] = original_parse(definition)
            return _parsed[definition]

    # lambda-in-process
    def invoke_lambda(parameters: dict, region: str, state_credentials: Any) -> dict:
        assert _active is not None, "no StateMachines installed"
        return _active.invoke(parameters["FunctionName"], parameters["Payload"])

    # execution-inline
    def start_inline(self: Any) -> None:
        self._execution_logic()

    # retry-waits-recorded
    class RecordedTime:
        @staticmethod
        def sleep(seconds: float) -> None:
            with recorder.lock:
                recorder.waits.append(seconds)

    # retry-count-per-state-entry
    original_eval_state = execute_state.ExecutionState._eval_state

    def eval_state_counting_afresh(self: Any, env: Any) -> None:
        for retrier in self.retry.retriers if self.retry else ():
            env.heap.pop(retrier.max_attempts._attempt_number_key(), None)
            env.heap.pop(retrier.backoff_rate._next_multiplier_key(), None)
        original_eval_state(self, env)

    # itemreader-jsonl
    original_input_type_init = input_type.InputType.__init__

    def input_type_init(self: Any, input_type: str) -> None:
        if input_type == "JSONL":
            self.input_type_value = "JSONL"
            return
        original_input_type_init(self, input_type)

    class JsonLinesReader(ResourceOutputTransformer):
        def _eval_body(self, env: Any) -> None:
            reader_config = env.stack.pop()
            body: str = env.stack.pop()
            items = [json.loads(line) for line in body.splitlines() if line.strip()]
            env.stack.append(items[: reader_config["MaxItemsValue"]])

    original_transformer_for = transformer_factory.resource_output_transformer_for

    def transformer_for(input_type: Any) -> Any:
        if input_type.input_type_value == "JSONL":
            return JsonLinesReader()
        return original_transformer_for(input_type=input_type)

    # resultwriter-files: each child's outcome, recorded as it ends.
    original_eval_job = item_worker.DistributedItemProcessorWorker._eval_job

    def eval_job(self: Any, env: Any, job: Any) -> None:
        original_eval_job(self, env, job)
        state = env.program_state()
        record: dict[str, Any] = {"Input": json.dumps(job.job_input)}
        error = getattr(state, "error", None)
        if job.job_output is not None:
            record.update(Status="SUCCEEDED", Output=json.dumps(job.job_output))
        else:
            record.update(
                Status="FAILED",
                Error=(error or {}).get("error"),
                Cause=(error or {}).get("cause"),
            )
        with recorder.lock:
            recorder.map_children.append(record)

    def write_results(env: Any, runtime: Any, credentials: Any) -> None:
        parameters = env.stack.pop()
        env.stack.pop()  # the outputs: written from the recorded children instead
        s3 = resource_eval_s3.ResourceEvalS3._get_s3_client(runtime, credentials)
        record = env.map_run_record_pool_manager.get_all()[-1]
        prefix = parameters["Prefix"]
        prefix = prefix if not prefix or prefix.endswith("/") else prefix + "/"
        base = f"{prefix}{record.map_run_arn.split(':')[-1]}/"
        with recorder.lock:
            children = list(recorder.map_children)
        files: dict[str, list[dict[str, Any]]] = {"FAILED": [], "PENDING": [], "SUCCEEDED": []}
        for status in ("SUCCEEDED", "FAILED"):
            chosen = [c for c in children if c["Status"] == status]
            if not chosen:
                continue
            key = f"{base}{status}_0.json"
            s3.put_object(Bucket=parameters["Bucket"], Key=key, Body=json.dumps(chosen).encode())
            files[status].append({"Key": key, "Size": len(json.dumps(chosen))})
        manifest = f"{base}manifest.json"
        body = {
            "DestinationBucket": parameters["Bucket"],
            "MapRunArn": record.map_run_arn,
            "ResultFiles": files,
        }
        s3.put_object(Bucket=parameters["Bucket"], Key=manifest, Body=json.dumps(body).encode())
        env.stack.append(
            {
                "MapRunArn": record.map_run_arn,
                "ResultWriterDetails": {"Bucket": parameters["Bucket"], "Key": manifest},
            }
        )

    original_map_execution = state_map.StateMap._eval_execution

    def map_execution(self: Any, env: Any) -> None:
        with recorder.lock:
            recorder.map_children.clear()
        try:
            original_map_execution(self, env)
        except Exception:
            # AWS writes the results of a Map Run that failed too.
            if self.result_writer is not None:
                self.result_writer.eval(env)
                env.stack.pop()
            raise

    # tolerated-failure
    original_map_run = iteration.DistributedIterationComponent._map_run

    def map_run(self: Any, env: Any, eval_input: Any) -> None:
        original_map_run(self, env, eval_input)
        outputs = env.stack[-1]
        record = eval_input.map_run_record
        failed = sum(1 for output in outputs if output is None)
        if not outputs or not failed:
            return
        # AWS fails the Map Run once either threshold is exceeded (both 0 unless set).
        if failed * 100 / len(outputs) > (record.tolerated_failure_percentage or 0) or failed > (
            record.tolerated_failure_count or 0
        ):
            name = StatesErrorName(typ=StatesErrorNameType.StatesExceedToleratedFailureThreshold)
            cause = "The specified tolerated failure threshold was exceeded"
            raise FailureEventException(
                FailureEvent(
                    env=env,
                    error_name=name,
                    event_type=HistoryEventType.MapRunFailed,
                    event_details=EventDetails(
                        mapRunFailedEventDetails=MapRunFailedEventDetails(
                            error=name.error_name, cause=cause
                        )
                    ),
                )
            )

    return [
        (asl_parser.AmazonStateLanguageParser, "parse", staticmethod(parse_once)),
        (lambda_eval_utils, "_invoke_lambda_function", invoke_lambda),
        (execution_worker.ExecutionWorker, "start", start_inline),
        (retrier_decl, "time", RecordedTime),
        (execute_state.ExecutionState, "_eval_state", eval_state_counting_afresh),
        (input_type.InputType, "__init__", input_type_init),
        (item_reader_decl, "resource_output_transformer_for", transformer_for),
        (item_worker.DistributedItemProcessorWorker, "_eval_job", eval_job),
        (resource_eval_s3.ResourceEvalS3, "_handle_put_object", staticmethod(write_results)),
        (state_map.StateMap, "_eval_execution", map_execution),
        (iteration.DistributedIterationComponent, "_map_run", map_run),
    ]


@functools.cache
def function_session() -> Any:
    """The botocore session the functions make their clients from (vhs.aws._session), one per
    process: a fresh session loads every service model again (about half a second a test).
    A test hooks the functions' calls on it (and unregisters what it registered)."""
    import botocore.session

    return botocore.session.get_session()


@functools.cache
def client(service: str) -> Any:
    """A client of `service` for the tests' own calls, one per process (made from the same
    session: a boto3 client made afresh costs about 0.15 s); moto intercepts its calls inside
    any `mock_aws`."""
    return function_session().create_client(service, region_name=REGION)


@contextlib.contextmanager
def installed(
    machine: Machine,
    handlers: Mapping[str, Callable[[Any, Any], Any]],
    *,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[StateMachines]:
    """`machine` created in moto (inside a `mock_aws(config={"stepfunctions":
    {"execute_state_machine": True}})`), its functions' environment set, moto patched; every
    patch undone on the way out. `handlers` maps a function's Handler ("handlers.reindex.handler")
    to the callable."""
    global _active
    import vhs.aws

    _check_moto_version()
    recorder = Recorder()
    variables = {k: v for f in machine.functions.values() for k, v in f.environment.items()}
    # What Lambda's runtime sets; and Powertools would send traces to X-Ray's daemon.
    variables.update(AWS_REGION=REGION, AWS_DEFAULT_REGION=REGION, POWERTOOLS_TRACE_DISABLED="true")
    with _install_lock:
        if _active is not None:
            raise RuntimeError("one StateMachines at a time in a process")
        saved_env = {k: os.environ.get(k) for k in variables}
        os.environ.update(variables)
        undo = []
        try:
            for owner, name, replacement in _patches(recorder):
                undo.append(
                    (
                        owner,
                        name,
                        owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name),
                    )
                )
                setattr(owner, name, replacement)
            _active = StateMachines(machine, handlers, recorder, clock)
            saved_session, vhs.aws._session = vhs.aws._session, function_session()
        except BaseException:
            _undo(undo, saved_env)
            raise
    try:
        yield _active
    finally:
        with _install_lock:
            _active = None
            vhs.aws._session = saved_session
            _undo(undo, saved_env)


def _undo(undo: list[tuple[Any, str, Any]], saved_env: dict[str, str | None]) -> None:
    for owner, name, original in reversed(undo):
        setattr(owner, name, original)
    for key, value in saved_env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


# --- the synthesized app ----------------------------------------------------------------------

STAGE = "sfn"


def _sources_digest(root: Any) -> str:
    """What the templates are made of: the app, infra/ and the Lambda asset (lambdas/)."""
    import hashlib

    digest = hashlib.sha256()
    paths = [root / "app.py", root / "cdk.json"]
    paths += sorted((root / "infra").rglob("*.py")) + sorted((root / "lambdas").rglob("*.py"))
    for path in paths:
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:24]


@functools.cache
def templates() -> dict[str, dict[str, Any]]:
    """The Import and Reindex stacks' templates: {"import": ..., "reindex": ...}. Synthesized
    once (cdk-nag off here; the infra tests synthesize with it) and kept in the temporary
    directory under a digest of every source they are made of, so pytest-xdist's workers (and
    later runs) share one synthesis: the first jsii use in a process costs about 10 s."""
    import tempfile
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    cache = Path(tempfile.gettempdir()) / "vhs-sfn-templates" / f"{_sources_digest(root)}.json"
    cache.parent.mkdir(parents=True, exist_ok=True)
    # One worker synthesizes; the others wait for its file rather than synthesize too.
    with open(cache.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if cache.exists():
            return json.loads(cache.read_text())
        found = _synthesize(root)
        partial = cache.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(found))
        os.replace(partial, cache)
        return found


def _synthesize(root: Any) -> dict[str, dict[str, Any]]:
    """The app as `cdk synth` builds it (cdk.json's context, stage STAGE), cdk-nag off."""
    import sys
    import tempfile

    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    import aws_cdk as cdk

    from infra import build

    context = json.loads((root / "cdk.json").read_text())["context"]
    with tempfile.TemporaryDirectory() as outdir:
        app = cdk.App(outdir=outdir, context={**context, "stage": STAGE})
        stacks = build(app, nag=False)
        assembly = app.synth()
        return {
            "import": assembly.get_stack_by_name(stacks.bulk_import.stack_name).template,
            "reindex": assembly.get_stack_by_name(stacks.reindex.stack_name).template,
        }
