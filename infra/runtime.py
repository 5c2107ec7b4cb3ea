"""The runtime the functions run on, as CDK names it: the Python version (LAMBDA_PYTHON_VERSION)
and the architecture (LAMBDA_ARCHITECTURE) of infra/config.py. The deployed functions
(function.py) and the Powertools layer `sam local invoke` is given (sam.py) both read it."""

from __future__ import annotations

from aws_cdk import aws_lambda as lambda_

from .config import LAMBDA_ARCHITECTURE, LAMBDA_PYTHON_VERSION

ARCHITECTURES = {"arm64": lambda_.Architecture.ARM_64, "x86_64": lambda_.Architecture.X86_64}


def python_runtime(version: str = LAMBDA_PYTHON_VERSION) -> lambda_.Runtime:
    return getattr(lambda_.Runtime, "PYTHON_" + version.replace(".", "_"))


def architecture(name: str = LAMBDA_ARCHITECTURE) -> lambda_.Architecture:
    return ARCHITECTURES[name]
