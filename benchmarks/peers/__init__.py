"""The systems VHS is measured against: two peers and the raw request floor.

Every system here has the same small interface (`benchmarks.systems.System`): `put`, `get`
and `delete`, each taking a JSON record or an id, with its own table and bucket.
"""
