"""The staging bucket: where producers put claim-check payloads and the ingest handler keeps
its dead letters and their receipts (infra/store.py deploys it; the local stack creates it)."""

from __future__ import annotations

from typing import Any

from .shape import MAX_SQS_RETENTION_SECONDS

# Producers put large payloads in a staging bucket and send a pointer (the SQS Extended Client
# format). The bucket is the pipeline's own. Producers write under STAGING_PREFIX only (each
# may be given a prefix of its own below it), and ingest reads only there; the handler's own
# objects live beside it under DEAD_LETTER_STAGING_PREFIX, where producers may neither write
# nor point. (The Java Extended Client writes under a prefix with withS3KeyPrefix.) Staged
# objects outlive every message that can point at them: a message lives at most the DLQ
# retention (14 days from its first enqueue).
STAGING_PREFIX = "incoming/"
# Where the handler stages a dead letter too large to resend with its reason attached (at the
# staging bucket's root, outside STAGING_PREFIX).
DEAD_LETTER_STAGING_PREFIX = "dead-letters/"
# Where the handler keeps a receipt of every dead letter it sends (keyed by the dead letter's
# message id): the only thing that makes a dead letter's reason trusted (ingest/deadletter.py).
# Under DEAD_LETTER_STAGING_PREFIX, which producers may not write.
DEAD_LETTER_RECEIPT_PREFIX = DEAD_LETTER_STAGING_PREFIX + "receipts/"
STAGING_EXPIRATION_DAYS = MAX_SQS_RETENTION_SECONDS // (24 * 3600) + 1
STAGING_EXPIRY_RULE_ID = "expire-staged-payloads"


def staging_expiry_rule() -> dict[str, Any]:
    """The S3 lifecycle rule that expires staged objects after STAGING_EXPIRATION_DAYS
    (INGEST.staging_expiry_days; infra/store.py's staging bucket declares the same rule)."""
    return {
        "ID": STAGING_EXPIRY_RULE_ID,
        "Status": "Enabled",
        "Filter": {"Prefix": ""},  # the whole bucket: staged payloads and dead letters
        "Expiration": {"Days": STAGING_EXPIRATION_DAYS},
    }
