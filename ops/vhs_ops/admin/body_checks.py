"""What is wrong with one body, judged from what was read: an inline body or part decoded from
its item, an S3 object's HEAD (or GET) response. No requests, threads or counters: the walk
over the table, which reads what these judge and keeps the report, is verify.py's.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from vhs import keys
from vhs.history.stored_deltas import Dictionaries, UndecodableBody, inline_bodies, inline_part
from vhs.model import Entry

from .findings import Finding, FindingKind


def inline_findings(
    id: str,
    retained: list[tuple[int, Entry]],
    dictionaries: Dictionaries,
    location: str,
) -> tuple[int, int, list[Finding]]:
    """Check every inline body of the `retained` versions of `id` (one pass over their delta
    chains, which run from a version to later ones, all retained too): how many there are,
    how many bytes were hashed, and the findings. A version that cannot be decoded because a
    later one it is stored against is damaged is reported with that version, once."""
    entries = dict(retained)
    broken: dict[int, tuple[UndecodableBody, list[int]]] = {}
    count = hashed = 0
    findings: list[Finding] = []
    for version, body in inline_bodies(retained, dictionaries):
        count += 1
        if isinstance(body, UndecodableBody):
            broken.setdefault(body.version, (body, []))[1].append(version)
            continue
        hashed += len(body)
        if len(body) != entries[version].size:
            detail = f"the inline body is {len(body)} bytes, the entry says {entries[version].size}"
            findings.append(
                Finding(
                    FindingKind.SIZE_MISMATCH,
                    id,
                    version,
                    f"{location}#v{version}",
                    detail,
                    (version,),
                )
            )
    for version, (error, affected) in broken.items():
        detail = f"the inline body does not decode to its hash: {error}"
        if affected != [version]:
            detail += f" (versions {', '.join(map(str, sorted(affected)))} cannot be read)"
        findings.append(
            Finding(
                FindingKind.HASH_MISMATCH,
                id,
                version,
                f"{location}#v{version}",
                detail,
                tuple(sorted(affected)),
            )
        )
    return count, hashed, findings


def inline_part_findings(
    id: str, retained: list[tuple[int, Entry]], location: str
) -> tuple[int, list[Finding]]:
    """Check that every inline part of the `retained` versions decodes to its hash: how many
    bytes were hashed, and the findings."""
    hashed = 0
    findings: list[Finding] = []
    for version, entry in retained:
        for part in entry.parts:
            if part.inline is None:
                continue
            try:
                data = inline_part(retained, version, part)
                actual = part.content_hash
            except UndecodableBody as error:
                data, actual = b"", str(error)
            hashed += len(data)
            if actual != part.content_hash:
                findings.append(
                    Finding(
                        FindingKind.HASH_MISMATCH,
                        id,
                        version,
                        f"{location}#v{version}/{part.name}",
                        f"the inline part {part.name!r} does not decode to its hash: {actual}",
                        (version,),
                    )
                )
    return hashed, findings


def object_problems(
    id: str,
    content_hash: str,
    expected_size: int,
    response: dict[str, Any],
    actual: str | None,
) -> tuple[list[tuple[FindingKind, str]], bool]:
    """What is wrong with the S3 object of `id` whose key names `content_hash`, from its HEAD
    or GET `response` (`actual`: the sha256 of the bytes a GET read): the findings' kinds and
    details, and whether its content went unconfirmed (no hash to check it against)."""
    size = response.get("ContentLength")
    stored = full_object_sha256(response)
    problems: list[str] = []
    found: list[tuple[FindingKind, str]] = []
    hashed_wrong = False
    if actual is not None and actual != content_hash:
        hashed_wrong = True
        problems.append(f"the body hashes to {actual}")
    if stored is not None and stored != content_hash:
        hashed_wrong = True
        problems.append(f"S3's SHA-256 checksum of it is {stored}")
    if size is not None and size != expected_size:
        problems.append(f"it is {size} bytes, the entry says {expected_size}")
    if problems:
        kind = FindingKind.HASH_MISMATCH if hashed_wrong else FindingKind.SIZE_MISMATCH
        found.append((kind, "; ".join(problems) + f" (the key names {content_hash})"))
    unconfirmed = not problems and actual is None and stored is None
    encoded = keys.id_in_metadata(response.get("Metadata"))
    named = keys.decode_metadata_id(encoded) if encoded else None
    if named != id:
        what = "no vhs-id metadata" if encoded is None else f"vhs-id metadata {encoded!r}"
        if encoded is not None:
            what += f" (decodes to {named!r})" if named is not None else " (not base64url)"
        found.append((FindingKind.METADATA_MISMATCH, f"{what}, expected the id {id!r}"))
    return found, unconfirmed


def full_object_sha256(response: dict[str, Any]) -> str | None:
    """The object's SHA-256 from S3 as hex, when it is of the whole object. A multipart
    upload's checksum is a checksum of the parts' checksums (COMPOSITE, `...-N`)."""
    value = response.get("ChecksumSHA256")
    if not value or "-" in value or response.get("ChecksumType") == "COMPOSITE":
        return None
    try:
        return base64.b64decode(value, validate=True).hex()
    except (binascii.Error, ValueError):
        return f"(undecodable: {value!r})"
