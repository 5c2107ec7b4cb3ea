"""The local stack as `sam local invoke` sees it: from inside a container.

The container's address for the host is vhs.shapes.local's; `vhs local up` writes every value
a function reads into a SAM `--env-vars` file (`env_vars_file`).
"""

from __future__ import annotations

import json
from pathlib import Path

from vhs import settings
from vhs.shapes.local import CONTAINER_HOST

# Credentials and the region are SAM's to set (from the caller's profile, or its defaults);
# a function's template never declares them.
_SAM_SETS = {
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_DEFAULT_REGION",
}


def container_endpoint(port: int, host: str = CONTAINER_HOST) -> str:
    return f"http://{host}:{port}"


def env_vars(environment: dict[str, str], port: int, host: str = CONTAINER_HOST) -> dict:
    """The `--env-vars` document for `environment` (what `vhs local up` exports): one set of
    "Parameters" for every function, since SAM passes each only the variables it declares.
    Every store setting is given, an unset one as empty (the library's default), so none
    keeps the deployed template's value (its body prefix, say)."""
    values = {name: "" for name in settings.STORE_VARIABLES}
    values.update({name: value for name, value in environment.items() if name not in _SAM_SETS})
    values["AWS_ENDPOINT_URL"] = container_endpoint(port, host)
    return {"Parameters": values}


def write_env_vars_file(path: Path, environment: dict[str, str], port: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(env_vars(environment, port), indent=2, sort_keys=True) + "\n")
    return path
