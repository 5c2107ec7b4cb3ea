"""The change feed: one notification per version, derived from the table's stream.

feed.py (deriving, publishing, replaying), stream.py (stream records in Lambda's shape).
"""
