"""Regenerate events/sqs-*.json (real Lambda SQS event shapes): python events/generate.py

The events/sam-*.json are not made here: they are SAM CLI's own generated events, kept as
`sam local generate-event` prints them (see events/README.md)."""

import base64
import hashlib
import json

QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:vhs-local-ingest"


def rec(n, body, attrs=None):
    attrs = attrs or {}
    return {
        "messageId": f"0000000{n}-1111-4222-8333-44445555666{n}",
        "receiptHandle": f"AQEB-example-receipt-handle-{n}",
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": "1795000000000",
            "SenderId": "AIDAEXAMPLE",
            "ApproximateFirstReceiveTimestamp": "1795000000100",
        },
        "messageAttributes": {
            k: {
                "stringValue": v,
                "stringListValues": [],
                "binaryListValues": [],
                "dataType": "Number",
            }
            for k, v in attrs.items()
        },
        "md5OfBody": hashlib.md5(body.encode()).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": QUEUE_ARN,
        "awsRegion": "us-east-1",
    }


def msg(**kw):
    return json.dumps(kw, separators=(",", ":"))


def event(*records):
    return {"Records": list(records)}


E = {}
E["sqs-small-record"] = event(
    rec(
        1,
        msg(
            id="b1000001",
            updated_at="2026-11-01T09:00:00Z",
            record={"title": "Moby-Dick", "creator": "Melville, Herman", "date": "1851"},
        ),
    )
)
E["sqs-body-base64"] = event(
    rec(
        1,
        msg(
            id="marc-0001",
            updated_at="2026-11-01T09:00:00Z",
            body_base64=base64.b64encode(
                b"<record><leader>00000nam a2200000 a 4500</leader></record>"
            ).decode(),
            content_type="application/marcxml+xml",
        ),
    )
)
E["sqs-delete"] = event(rec(1, msg(id="b1000001", updated_at="2026-11-02T09:00:00Z", deleted=True)))
E["sqs-mixed-batch"] = event(
    rec(
        1,
        msg(
            id="b2000001",
            updated_at="2026-11-01T10:00:00Z",
            record={"title": "Middlemarch", "edition": 2},
        ),
    ),
    rec(
        2,
        msg(
            id="b2000001",
            updated_at="2026-11-01T09:00:00Z",
            record={"title": "Middlemarch", "edition": 1},
        ),
    ),
    rec(3, msg(id="b2000002", updated_at="2026-11-01T09:00:00Z", record={"title": "Bleak House"})),
    rec(4, msg(id="b2000002", updated_at="2026-11-01T09:00:00Z", record={"title": "Bleak House"})),
    rec(5, msg(id="b2000003", updated_at="2026-11-01T11:00:00Z", deleted=True)),
)
E["sqs-poison"] = event(
    rec(1, "this is not JSON"),
    rec(2, msg(id="b3000001", updated_at="2026-11-01T09:00:00Z", record={}, colour="blue")),
    rec(3, msg(id="b3000002", updated_at="2026-11-01T09:00:00", record={})),
    rec(4, msg(id="b3000003", updated_at="2026-11-01T09:00:00Z", record={}, deleted=True)),
    rec(5, msg(id="", updated_at="2026-11-01T09:00:00Z", record={})),
)
EXAMPLE_CLAIM_CHECK_KEY = "incoming/claim-checks/example.json"
E["sqs-claim-check"] = event(
    rec(
        1,
        json.dumps(
            [
                "software.amazon.payloadoffloading.PayloadS3Pointer",
                {"s3BucketName": "vhs-local-staging", "s3Key": EXAMPLE_CLAIM_CHECK_KEY},
            ]
        ),
        {"ExtendedPayloadSize": "1048577"},
    )
)
E["sqs-claim-check-legacy"] = event(
    rec(
        1,
        json.dumps(
            [
                "com.amazon.sqs.javamessaging.MessageS3Pointer",
                {"s3BucketName": "vhs-local-staging", "s3Key": EXAMPLE_CLAIM_CHECK_KEY},
            ]
        ),
        {"SQSLargePayloadSize": "1048577"},
    )
)
E["sqs-record-location"] = event(
    rec(
        1,
        msg(
            id="scan-0001.tiff",
            updated_at="2026-11-01T09:00:00Z",
            record_location="s3://vhs-local-staging/incoming/scan-0001.tiff",
            content_type="image/tiff",
        ),
    )
)
for name, ev in E.items():
    with open(f"events/{name}.json", "w") as f:
        json.dump(ev, f, indent=2)
        f.write("\n")
print(len(E), "events")
