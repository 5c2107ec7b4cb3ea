"""The change feed: one notification per version, from the stream; and reindex."""
