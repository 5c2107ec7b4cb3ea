"""The JSON Patch a change notification of an update carries (docs/changes.md, "patch").

An update of a JSON record whose previous version (version - 1) is a JSON record gets exactly
one of two fields: `patch`, the RFC 6902 JSON Patch from the previous version's record to this
one's (vhs.json_patch), or `patch_omitted`, why there is none:

* "too_large": the patch, as compact UTF-8 JSON, is over CHANGES.max_patch_bytes;
* "not_inline": either body is in S3, not in the item: the feed reads nothing but the stream
  record, whose two images hold both versions' inline bodies (the old image's current entry is
  the previous version);
* "unreadable": an inline body that does not decode to its hash, or is not JSON by the
  rules every door applies (strict_json: I-JSON, at most MAX_DEPTH levels deep). A body
  stored before a door applied them is read so (`vhs verify` reports a body that does not
  decode; the notification still goes out).

Other notifications (a first version, a delete, the first version after a delete, a change of
content type, a step of more than one version) have neither field.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping
from typing import Any

from ..codec import JSON_CONTENT_TYPE
from ..errors import InvalidInput, UndecodableBody
from ..history.stored_deltas import Dictionaries, inline_body
from ..index.codec import CURRENT, ID, VERSION, item_from_dynamo
from ..json_patch import TOO_LARGE, UNREADABLE, make_patch
from ..model import Item
from ..shapes import CHANGES
from ..strict_json import parse_document

log = logging.getLogger(__name__)

NOT_INLINE = "not_inline"


def patch_fields(
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any],
    *,
    limit: int = CHANGES.max_patch_bytes,
    dictionaries: Dictionaries | None = None,
) -> dict[str, Any]:
    """The notification fields of the version `new`'s current entry makes over `old`'s:
    {"patch": [...]}, {"patch_omitted": reason}, or {} when it is not an update of a JSON
    record by a JSON record. Images are DynamoDB JSON, binary values as bytes (an SDK's) or
    base64 text (a Lambda event's). `dictionaries`: the way to the store's zstd dictionaries,
    for a body packed with one."""
    before, after = _current(old), _current(new)
    if before is None or after is None or after.version != before.version + 1:
        return {}
    if any(
        i.current.deleted or i.current.content_type != JSON_CONTENT_TYPE for i in (before, after)
    ):
        return {}
    if before.current.inline is None or after.current.inline is None:
        return {"patch_omitted": NOT_INLINE}
    try:
        records = [
            parse_document(inline_body(i.versions(), i.version, dictionaries))
            for i in (before, after)
        ]
    except (UndecodableBody, InvalidInput) as error:
        log.warning("%r version %d: no patch: %s", after.id, after.version, error)
        return {"patch_omitted": UNREADABLE}
    patch = make_patch(*records, limit=limit)
    if patch is None:
        return {"patch_omitted": TOO_LARGE}
    return {"patch": patch}


def _current(image: Mapping[str, Any] | None) -> Item | None:
    """The image's id, version and current entry alone (its history is not decoded)."""
    if not image or CURRENT not in image:
        return None
    return item_from_dynamo({n: _binary(image[n]) for n in (ID, VERSION, CURRENT) if n in image})


def _binary(value: Any) -> Any:
    """An AttributeValue with its binary values as bytes (a Lambda event has them in base64)."""
    ((kind, inner),) = value.items()
    if kind == "B":
        return {"B": base64.b64decode(inner) if isinstance(inner, str) else inner}
    if kind == "M":
        return {"M": {name: _binary(v) for name, v in inner.items()}}
    if kind == "L":
        return {"L": [_binary(v) for v in inner]}
    return value
