# VHS developer entry points. Every target sets up what it needs, and is safe to re-run.
SHELL := /bin/bash
# Any Python 3 runs tools/runtime_python.py, which finds (or fetches from Debian's packages into
# .python/) the Python the functions run on: LAMBDA_PYTHON_VERSION in infra/config.py, the one
# place it is written. .venv and mutmut's venv are made on it; the venvs of the other tools
# (the scanners, the SAM CLI) on any Python 3.
PYTHON ?= python3
RUNTIME_VERSION := $(shell sed -n 's/^LAMBDA_PYTHON_VERSION = "\([0-9.]*\)"$$/\1/p' infra/config.py)
# The lowest Python the library and the CLI promise (requires-python in pyproject.toml).
LOWEST_VERSION := $(shell sed -n 's/^requires-python = ">=\([0-9.]*\)"$$/\1/p' pyproject.toml)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LOWEST_VENV := .venv-lowest
LOWEST_STAMP := $(LOWEST_VENV)/.installed
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup demo test lint format unit unit-lowest bench local clean
.PHONY: synth infra-check audit mutation sam-layer sam-synth sam-check openapi bench-read-api
NODE_STAMP := node_modules/.installed
# The security scanners live in a venv of their own: checkov pins libraries that clash with
# aws-cdk-lib and moto.
AUDIT_VENV := .venv-audit
AUDIT_BIN := $(AUDIT_VENV)/bin
AUDIT_STAMP := $(AUDIT_VENV)/.installed
MUTATION_VENV := .venv-mutation
# The AWS SAM CLI pins its own boto3: a venv of its own too.
SAM_VENV := .venv-sam
SAM_STAMP := $(SAM_VENV)/.installed
SAM_LAYER_STAMP := .sam/powertools-layer/.installed
MUTATION_STAMP := $(MUTATION_VENV)/.installed

setup: $(STAMP)

# A .venv on another Python than the runtime's (made before the runtime moved) is made anew.
ifneq ($(shell $(BIN)/python -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null),$(RUNTIME_VERSION))
.PHONY: $(STAMP)
endif

# Reinstall only when a requirements or project file changes. Both venvs drop the setuptools
# that `venv` seeds (older ones than the fix for CVE-2024-6345): nothing needs it, and
# `pip install -e .` builds in isolation with the setuptools pyproject.toml asks for.
$(STAMP): requirements.txt requirements-dev.txt pyproject.toml tests/harness/pyproject.toml
	@$(PYTHON) tools/runtime_python.py venv $(VENV) --version $(RUNTIME_VERSION)
	@echo "installing Python dependencies into $(VENV) on Python $(RUNTIME_VERSION) (first run takes about 2 minutes)"
	@$(BIN)/pip install --quiet --upgrade pip 2> >(grep -v '^WARNING: Location' >&2)
	@$(BIN)/pip uninstall --quiet --yes setuptools 2> >(grep -v '^WARNING: Skipping' >&2)
	@$(BIN)/pip install --quiet -r requirements-dev.txt 2> >(grep -v '^WARNING: Location' >&2)
	@$(BIN)/pip install --quiet --no-deps -e . 2> >(grep -v '^WARNING: Location' >&2)
	@$(BIN)/pip install --quiet --no-deps -e tests/harness 2> >(grep -v '^WARNING: Location' >&2)
	@$(BIN)/pip check
	@touch $@

# The CDK CLI and dynalite, pinned in package.json/package-lock.json: `npm ci` only when they change.
setup: $(NODE_STAMP)
$(NODE_STAMP): package.json package-lock.json
	@echo "installing the pinned CDK CLI and dynalite into node_modules"
	@npm ci --no-audit --no-fund --loglevel=error
	@touch $@

## synth: synthesize the CDK app into cdk.out/ with the pinned CLI (offline: no AWS, no Docker)
synth: $(STAMP) $(NODE_STAMP)
	npx cdk synth --quiet

## infra-check: CLI synth (fails on any unacknowledged cdk-nag finding), then cfn-lint
infra-check: synth
	$(BIN)/cfn-lint --non-zero-exit-code warning cdk.out/*.template.json

$(AUDIT_STAMP): requirements-audit.txt
	@test -x $(AUDIT_BIN)/python || $(PYTHON) -m venv $(AUDIT_VENV)
	@echo "installing the security scanners into $(AUDIT_VENV)"
	@$(AUDIT_BIN)/pip install --quiet --upgrade pip 2> >(grep -v '^WARNING: Location' >&2)
	@$(AUDIT_BIN)/pip uninstall --quiet --yes setuptools 2> >(grep -v '^WARNING: Skipping' >&2)
	@$(AUDIT_BIN)/pip install --quiet -r requirements-audit.txt 2> >(grep -v '^WARNING: Location' >&2)
	@$(AUDIT_BIN)/pip check
	@touch $@

## audit: bandit on the code, checkov on the synthesized templates, pip-audit on every venv
audit: $(STAMP) $(AUDIT_STAMP) $(LOWEST_STAMP) synth
	$(AUDIT_BIN)/bandit -q -r lambdas ops infra tools
	$(AUDIT_BIN)/checkov --config-file .checkov.yaml --file cdk.out/*.template.json
	$(AUDIT_BIN)/python tools/dependency_audit.py $(VENV) $(AUDIT_VENV) $(LOWEST_VENV)

## demo: run the main job on the local stack (moto's server on 127.0.0.1)
demo: $(STAMP)
	@$(BIN)/python -m vhs_ops.local.demo

## test: every test and check, as CI runs them. The five phases run side by side, and so do
## the four installs a fresh clone needs (.venv, node_modules, .venv-audit, .venv-lowest); one
## synth serves infra-check and audit. pytest keeps both cores busy; the others fill the time it
## leaves one idle (its last tests, the installs' and pip-audit's network waits). pytest's
## progress shows as it runs; each other phase's output is printed whole when it ends
## (--output-sync, where make has it: GNU make 4). make fails if any phase does, once the
## others have ended.
OUTPUT_SYNC := $(if $(filter output-sync,$(.FEATURES)),--output-sync=target)
# --output-sync holds a recipe's output until the recipe ends (12 minutes, for pytest), so
# pytest writes to descriptor 3 instead: test's own output, which make does not hold.
test:
	@$(MAKE) --no-print-directory --jobs=4 $(OUTPUT_SYNC) PROGRESS_FD=3 lint unit unit-lowest infra-check audit 3>&1

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PYTHONPATH=lambdas $(BIN)/lint-imports --no-cache

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# One worker per core (pytest-xdist): most tests wait on a moto server of their worker's own, so
# two workers keep both cores of a small CI machine busy. worksteal: an idle worker takes tests
# queued for the other, so one long test near the end does not leave a core idle. The 25
# slowest tests are listed at the end: where make test's 12 minutes go.
TO_PROGRESS = $(if $(PROGRESS_FD),>&$(PROGRESS_FD) 2>&1)
unit: $(STAMP) $(NODE_STAMP)
	@$(BIN)/python -c 'import sys; print(f"pytest on Python {sys.version.split()[0]} ({sys.executable})")' $(TO_PROGRESS)
	$(BIN)/python -m pytest -q -n auto --dist worksteal --durations=25 $(TO_PROGRESS)

# The library and the CLI promise requires-python (pyproject.toml) to their users, who install
# them on their own Pythons: the tests that hold that promise (tests/lowest.txt says which, and
# why) run on the lowest supported Python too, in a venv of its own with what they need.
LOWEST_TESTS = $(shell grep -v '^\#' tests/lowest.txt)
unit-lowest: $(LOWEST_STAMP)
	@$(LOWEST_VENV)/bin/python -c 'import sys; print(f"pytest on Python {sys.version.split()[0]} ({sys.executable}), the lowest supported")'
	$(LOWEST_VENV)/bin/python -m pytest -q -p no:cacheprovider $(LOWEST_TESTS)

$(LOWEST_STAMP): requirements-lowest.txt requirements.txt requirements-dev.txt pyproject.toml tests/harness/pyproject.toml
	@$(PYTHON) tools/runtime_python.py venv $(LOWEST_VENV) --version $(LOWEST_VERSION) --no-fetch
	@echo "installing the lowest-Python job's dependencies into $(LOWEST_VENV) on Python $(LOWEST_VERSION)"
	@$(LOWEST_VENV)/bin/pip install --quiet --upgrade pip 2> >(grep -v '^WARNING: Location' >&2)
	@$(LOWEST_VENV)/bin/pip uninstall --quiet --yes setuptools 2> >(grep -v '^WARNING: Skipping' >&2)
	@$(LOWEST_VENV)/bin/pip install --quiet -r requirements-lowest.txt 2> >(grep -v '^WARNING: Location' >&2)
	@$(LOWEST_VENV)/bin/pip install --quiet --no-deps -e . -e tests/harness 2> >(grep -v '^WARNING: Location' >&2)
	@$(LOWEST_VENV)/bin/pip check
	@touch $@

## bench: every benchmark (python -m benchmarks all); writes their figures in docs/benchmarks.md
bench: $(STAMP)
	$(BIN)/python -m benchmarks all --write docs/benchmarks.md

## bench-read-api: the read API's figures in docs/benchmarks.md alone
bench-read-api: $(STAMP)
	$(BIN)/python -m benchmarks read-api --write docs/benchmarks.md

## openapi: write the read API's OpenAPI document, generated from its routes (tests check it)
openapi: $(STAMP)
	PYTHONPATH=lambdas $(BIN)/python -c "from vhs.read_api.routes import openapi_document; print(openapi_document(), end='')" > docs/read-api.openapi.json

## local: start the local stack and keep it running (Ctrl-C stops it)
local: $(STAMP)
	$(BIN)/vhs local up

clean:
	rm -rf $(VENV) $(LOWEST_VENV) .python $(AUDIT_VENV) $(MUTATION_VENV) $(SAM_VENV) .mutation cdk.out cdk.out.sam .sam .pytest_cache .ruff_cache .hypothesis .bench

$(SAM_STAMP): requirements-sam.txt
	@test -x $(SAM_VENV)/bin/python || $(PYTHON) -m venv $(SAM_VENV)
	@echo "installing the AWS SAM CLI into $(SAM_VENV) (about 90 s)"
	@$(SAM_VENV)/bin/pip install --quiet --upgrade pip 2> >(grep -v '^WARNING: Location' >&2)
	@$(SAM_VENV)/bin/pip install --quiet -r requirements-sam.txt 2> >(grep -v '^WARNING: Location' >&2)
	@touch $@

## sam-layer: the pinned Powertools as a local layer for `sam local invoke` (.sam/powertools-layer),
## with its parser extra (pydantic: the read API validates with it, as the managed layer ships
## it), built for the functions' runtime and architecture (infra/config.py: Python 3.14, arm64)
sam-layer: $(SAM_LAYER_STAMP)
$(SAM_LAYER_STAMP): requirements.txt $(STAMP)
	@rm -rf .sam/powertools-layer
	@$(BIN)/pip install --quiet --no-compile --target .sam/powertools-layer/python \
		--platform manylinux2014_aarch64 --only-binary=:all: --python-version 3.14 --implementation cp \
		"$$(grep '^aws-lambda-powertools==' requirements.txt | sed 's/==/[parser]==/')" \
		2> >(grep -v '^WARNING: Location' >&2)
	@touch $@

## sam-synth: templates for `sam local invoke` (cdk.out.sam/; never deploy them; infra/sam.py)
sam-synth: $(SAM_LAYER_STAMP) $(NODE_STAMP)
	npx cdk synth --quiet -c samLocal=true -o cdk.out.sam

## sam-check: the real SAM CLI resolves each function, its layer and its environment, and
## `sam validate --lint` passes on every deployed template (outside `make test`: ~2 minutes)
sam-check: $(SAM_STAMP) sam-synth synth
	$(SAM_VENV)/bin/python tools/sam_check.py --vhs $(BIN)/vhs --sam $(SAM_VENV)/bin/sam

## mutation: mutmut over the core modules (tools/mutation.toml), outside CI; prints kill rates
mutation: $(MUTATION_STAMP)
	$(MUTATION_VENV)/bin/python tools/mutation.py run

# On the runtime's Python, as .venv is: mutmut runs the suite, whose tests hold that they run
# there (test_makefile's stand-in .venv, test_runtime_python). Made anew on another Python.
ifneq ($(shell $(MUTATION_VENV)/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null),$(RUNTIME_VERSION))
.PHONY: $(MUTATION_STAMP)
endif
$(MUTATION_STAMP): requirements-mutation.txt requirements-dev.txt requirements.txt pyproject.toml tests/harness/pyproject.toml
	@$(PYTHON) tools/runtime_python.py venv $(MUTATION_VENV) --version $(RUNTIME_VERSION)
	@echo "installing mutmut into $(MUTATION_VENV)"
	@$(MUTATION_VENV)/bin/pip install --quiet -r requirements-mutation.txt
	@$(MUTATION_VENV)/bin/pip install --quiet --no-deps -e .
	@$(MUTATION_VENV)/bin/pip install --quiet --no-deps -e tests/harness
	@touch $@
