"""The CDK app of VHS: constructs for the store, ingest and monitoring, and their stacks.

`app.py` at the repository root calls `build`; tests build the same stacks in-process.
"""

from .config import VhsConfig
from .stacks import IngestStack, StoreStack, VhsStacks, build

__all__ = ["IngestStack", "StoreStack", "VhsConfig", "VhsStacks", "build"]
