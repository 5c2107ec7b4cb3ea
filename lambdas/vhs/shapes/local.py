"""Where the local stack listens, as the library, `sam local invoke` and the SAM synth see it.

The CDK app's SAM synth (infra/sam.py) declares a function's AWS_ENDPOINT_URL from these, and
`vhs local up` serves on the same port, so the two cannot disagree.
"""

from __future__ import annotations

DEFAULT_PORT = 4567
# A container reaches the host as host.docker.internal (Docker Desktop; on Linux, pass
# `--add-host host.docker.internal:host-gateway` to SAM, docs/local.md).
CONTAINER_HOST = "host.docker.internal"
CONTAINER_ENDPOINT = f"http://{CONTAINER_HOST}:{DEFAULT_PORT}"
