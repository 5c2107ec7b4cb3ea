"""Ingest: a message read once, coalesced, and written to the store or dead-lettered."""
