"""The body store: content-addressed, immutable objects in S3.

`S3BodyStore.put` uploads with ChecksumSHA256, so S3 itself refuses bytes that do not match
the digest in the key; `get` hashes what it reads and raises `BodyHashMismatch` rather than
return wrong data, and `DanglingPointer` when the object is missing. Nothing here deletes:
only the garbage collector does, under its own protocol.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import time
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from botocore.exceptions import ClientError

from ..aws import is_object_missing
from ..codec import Body
from ..errors import BodyHashMismatch, DanglingPointer

# One PutObject takes up to 5 GiB; multipart above this keeps memory and retries small.
MULTIPART_THRESHOLD = 64 * 1024 * 1024
MULTIPART_PART_SIZE = 64 * 1024 * 1024
MULTIPART_CONCURRENCY = 4


def _b64_digest(hex_digest: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_digest)).decode()


class S3BodyStore:
    def __init__(
        self,
        s3_client: Any,
        bucket: str,
        *,
        multipart_threshold: int = MULTIPART_THRESHOLD,
        part_size: int = MULTIPART_PART_SIZE,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.clock = clock
        self.s3 = s3_client
        self.bucket = bucket
        self.multipart_threshold = multipart_threshold
        self.part_size = part_size

    def location(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def put(self, key: str, body: Body, metadata: Mapping[str, str]) -> float:
        # Always PUT, never HEAD first: one request on the happy path, and re-uploading the
        # same content refreshes LastModified, which the garbage collector's grace period uses.
        if body.size <= self.multipart_threshold:
            created = self.clock()
            self.s3.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=body.read_all(),
                ChecksumAlgorithm="SHA256",
                ChecksumSHA256=_b64_digest(body.sha256),
                ContentType=body.content_type,
                Metadata=dict(metadata),
            )
            return created
        return self._put_multipart(key, body, metadata)

    def _put_multipart(self, key: str, body: Body, metadata: Mapping[str, str]) -> float:
        upload = self.s3.create_multipart_upload(
            Bucket=self.bucket,
            Key=key,
            ChecksumAlgorithm="SHA256",
            ContentType=body.content_type,
            Metadata=dict(metadata),
        )
        upload_id = upload["UploadId"]

        def send(numbered: tuple[int, bytes]) -> dict[str, Any]:
            number, chunk = numbered
            part_digest = base64.b64encode(hashlib.sha256(chunk).digest()).decode()
            response = self.s3.upload_part(
                Bucket=self.bucket,
                Key=key,
                UploadId=upload_id,
                PartNumber=number,
                Body=chunk,
                ChecksumSHA256=part_digest,
            )
            return {"PartNumber": number, "ETag": response["ETag"], "ChecksumSHA256": part_digest}

        try:
            parts = self._send_parts(body, send)
            created = self.clock()  # the object exists only once the upload is completed
            self.s3.complete_multipart_upload(
                Bucket=self.bucket,
                Key=key,
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},
            )
            return created
        except BaseException:
            # Aborting removes only the unfinished parts, never a stored body; the bucket's
            # lifecycle rule aborts it anyway if this process dies first.
            with contextlib.suppress(ClientError):
                self.s3.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
            raise

    def _send_parts(self, body: Body, send: Any) -> list[dict[str, Any]]:
        """Upload parts concurrently, with at most MULTIPART_CONCURRENCY parts in memory."""
        done: list[dict[str, Any]] = []
        with ThreadPoolExecutor(MULTIPART_CONCURRENCY) as pool:
            running: set[Future] = set()
            for numbered in enumerate(body.chunks(self.part_size), start=1):
                if len(running) >= MULTIPART_CONCURRENCY:
                    finished, running = wait(running, return_when=FIRST_COMPLETED)
                    done += [f.result() for f in finished]
                running.add(pool.submit(send, numbered))
            done += [f.result() for f in running]
        return sorted(done, key=lambda part: part["PartNumber"])

    def presigned_url(self, key: str, expires_in: int) -> str:
        """A URL that GETs `key` without credentials for `expires_in` seconds (signed locally:
        no request is made)."""
        return self.s3.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": key}, ExpiresIn=expires_in
        )

    def get(self, key: str, sha256: str) -> bytes:
        try:
            response = self.s3.get_object(Bucket=self.bucket, Key=key)
        except ClientError as error:
            if is_object_missing(error):
                raise DanglingPointer(self.location(key)) from None
            raise
        data = response["Body"].read()
        actual = hashlib.sha256(data).hexdigest()
        if actual != sha256:
            raise BodyHashMismatch(self.location(key), sha256, actual)
        return data
