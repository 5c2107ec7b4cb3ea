"""A record's bodies and parts as stored: the S3 body store (`s3`), the named parts beside a
body (`parts`), how an inline body is packed into the item (`packing`: compressed, or as a delta
against its successor), and the zstd dictionaries it is packed with (`dictionaries`).

It stands on the values (codec, errors, the AWS ground); history and the item above use it."""
