"""The operator side of VHS, never in the Lambda asset: the `vhs` command line (cli), the local
stack on moto's server (local), the operator tools (admin: the dead-letter queue, migrate,
verify, the producer) and the local provisioning of the resources (provisioning).

It builds on the `vhs` package in lambdas/ (the asset), and nothing there imports it: the
import contracts in pyproject.toml hold that.
"""
