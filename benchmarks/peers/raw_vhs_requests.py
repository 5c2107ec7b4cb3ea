"""A diagnostic for the wall-time table: VHS's own requests, replayed with bare boto3 calls.

For each round it runs the operation through a VHS store of its own (untimed), records every
request that store sends, with its exact parameters, and replays them on a second table and
bucket: the set-up's requests untimed, the operation's requests timed. So it sends exactly
what VHS sends, whatever VHS's request shapes become, with none of VHS's code around them
(no validation, hashing, compression, parsing or integrity checks). Beside VHS and the raw
floor it splits VHS's wall-time overhead in two:

* VHS ÷ this: the cost of VHS's client code;
* this ÷ raw floor: the cost of VHS's request shapes on this server (on moto, largely its
  Python evaluation of update, condition and projection expressions).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from botocore import xform_name
from botocore.exceptions import ClientError

from vhs import resources
from vhs.local.stack import DEFAULT_REGION

from ..scenarios import Operation, Samples
from ..systems import VhsSystem

Request = tuple[str, str, dict[str, Any]]  # (service, operation, parameters)


class _Recorder:
    """Records the parameters of every call made through the clients it is attached to."""

    def __init__(self, *clients: Any) -> None:
        self.requests: list[Request] = []
        self.recording = False
        for client in clients:
            client.meta.events.register("provide-client-params", self._record)

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if self.recording:
            service = model.service_model.service_name
            self.requests.append((service, model.name, copy.deepcopy(params)))

    @contextmanager
    def record(self) -> Iterator[list[Request]]:
        self.requests = []
        self.recording = True
        try:
            yield self.requests
        finally:
            self.recording = False


class RawVhsRequests:
    name = "raw, VHS's requests"

    def __init__(
        self, s3: Any, dynamodb: Any, probe: Any, *, scratch: tuple[Any, Any], table: str
    ) -> None:
        # The replay target: the same table shape and bucket settings as VHS's own.
        self.clients = {"s3": s3, "dynamodb": dynamodb}
        self.table, self.bucket = table, table
        resources.create_store_resources(
            dynamodb, s3, table_name=table, bucket_name=table, region=DEFAULT_REGION
        )
        # The VHS store whose requests are recorded, on tables of its own.
        scratch_s3, scratch_dynamodb = scratch
        self.source = VhsSystem(
            scratch_s3, scratch_dynamodb, probe, table=f"{table}-src", bucket=f"{table}-src"
        )
        self.recorder = _Recorder(scratch_s3, scratch_dynamodb)

    def prepare_operation(
        self, operation: Operation, id: str, samples: Samples
    ) -> Callable[[], None]:
        """Run `operation` through the recorded store; replay its set-up now and return the
        replay of the operation itself."""
        with self.recorder.record() as setup:
            action = operation.prepare(self.source, id, samples)
        self._replay(setup)
        with self.recorder.record() as requests:
            action()
        recorded = list(requests)
        return lambda: self._replay(recorded)

    def _replay(self, requests: list[Request]) -> None:
        for service, operation, params in requests:
            params = dict(params)
            if "TableName" in params:
                params["TableName"] = self.table
            if "Bucket" in params:
                params["Bucket"] = self.bucket
            call = getattr(self.clients[service], xform_name(operation))
            try:
                response = call(**params)
            except ClientError as error:
                # A refused write is part of the operation (duplicate or stale put).
                if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                    raise
                continue
            if "Body" in response:
                response["Body"].read()
