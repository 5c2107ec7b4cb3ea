"""The `vhs` command line: records, the pipeline, maintenance and the dead-letter queue."""

from .app import build_parser, main

__all__ = ["build_parser", "main"]
