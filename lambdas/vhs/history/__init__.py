"""A record's retained history, as stored and as read.

* `stored_deltas`: how earlier inline versions are kept, each as a compressed delta against the
  version after it, and decoded back (the write path and every reader of an inline body);
* `diffs`: what changed between two retained versions, for readers (a JSON Patch for
  JSON records, made by `vhs.json_patch`);
* `time_travel`: which version was current at a moment, by either clock.

It stands on the S3 side (vhs.bodies) and the values; the item and the store above use it."""
