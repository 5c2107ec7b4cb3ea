"""The local stack: VHS on moto's server on 127.0.0.1, never in the Lambda asset.

It runs the functions' own handlers, which live beside the `vhs` package in the asset's folder
(lambdas/handlers): that folder is not a package to install, so it goes on the path here, once,
for every module of the local stack that loads a handler.
"""

import sys
from pathlib import Path

import vhs

ASSET_DIR = str(Path(vhs.__file__).resolve().parent.parent)
if ASSET_DIR not in sys.path:
    sys.path.insert(0, ASSET_DIR)
