"""The index: the DynamoDB item of each record id, and the table that holds them.

A store is a body store (S3) and an index (DynamoDB), composed. This package is the index:
the table's reads and conditional writes (`table.DynamoIndex`), the requests' expressions
(`updates`) and the ordering conditions they carry (`conditions`), the item's codec (`codec`:
its layout, and its writer), its reader (`decode`: every field checked, in one pass), the two
layouts of its values (`layouts`) and its attribute names (`attributes`), its size by
DynamoDB's rules (`size`), what a store's configuration lets it hold (`budget`), and the one
whole-table read (`scan`). The package's own order is an import contract (pyproject.toml's
"index").
"""
