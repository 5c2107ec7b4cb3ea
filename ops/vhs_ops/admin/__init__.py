"""Operator tools, never in the Lambda asset: the `vhs dlq` tool, the producer, verify."""
