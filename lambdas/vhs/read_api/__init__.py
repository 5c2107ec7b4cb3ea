"""The read API: records over HTTP, read-only, behind a Lambda function URL (AuthType
AWS_IAM). handlers/read_api.py is its Lambda; the routes are routes.py's, a body's encoding
responses.py's, the problem details problems.py's, the OpenAPI document's shapes document.py's.

Design notes:

* The front door is a function URL, not API Gateway: IAM (SigV4, service "lambda") already
  authorises every request, and the URL adds nothing per request to the Lambda invocation
  (API Gateway would add $1-3.50 a million). Powertools' `LambdaFunctionUrlResolver` routes
  (payload format 2.0) and generates the OpenAPI document from these routes
  (docs/read-api.openapi.json, checked by tests/core/test_read_api.py).
* An id is ONE path segment, percent-encoded: ids may hold "/", "%", spaces, anything. A
  function URL hands over `rawPath` still encoded and Powertools matches path parameters
  without decoding them (its pattern excludes "/", so "%2F" stays inside the segment), so the
  segment is decoded in routes.py, once, as UTF-8. A segment that does not decode, or an id that
  `keys.validate_id` refuses, is a 400.
* One item read per request (`store.locate`), and the body only when it is sent: an
  `If-None-Match` that names the content hash (the `ETag`) gets a 304 before any body is read
  or URL presigned, and a body too large for the response gets a 307 to a presigned S3 URL,
  also without reading it. A Lambda response carries at most 6 MB, and binary bodies travel
  base64 (4/3 larger): `response_limit()` is the budget of the encoded body, so a body is
  redirected when its base64 form would exceed it. Text bodies travel as JSON strings when
  that is no larger than the budget (escaping may exceed 4/3), else base64.
* Errors are RFC 9457 problem details (application/problem+json). Bad input (an id or version
  that cannot be one) is 400, an unknown id, version or route 404; a deleted record is 404
  too, not 410, because a later put brings the id back. A damaged item (errors.DamagedItem) is
  a 502 naming the id and the field. Anything else is a 500 problem with nothing of the error
  in it (it is logged), never a stack trace.
"""
