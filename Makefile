# Two commands for a newcomer: `make run` serves the web chat, `make test` runs the suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run sandbox cluster test test-stress bench bench-turns lint migrations-check user venv screenshots

# uv installs the same pins as pip in about 15 s instead of a minute or more; when uv itself
# cannot be installed, pip does the work.
$(STAMP): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	if $(PY) -m pip install --quiet --disable-pip-version-check uv; then \
		$(VENV)/bin/uv pip install --quiet --python $(PY) -r requirements.txt; \
	else \
		$(PY) -m pip install --quiet --upgrade pip && $(PY) -m pip install --quiet -r requirements.txt; \
	fi
	touch $(STAMP)

venv: $(STAMP)

# The session's sandbox (docs/design.md §28): bubblewrap from the system's packages when it
# is missing (a host without it, or without apt-get, serves without run_code and says why),
# then the sandbox's own Python (cached: nothing to do when it is up to date).
sandbox: $(STAMP)
	@command -v bwrap >/dev/null 2>&1 || (command -v apt-get >/dev/null 2>&1 && \
		(apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null)) || \
		echo "bubblewrap could not be installed: run_code will not be offered"
	$(PY) manage.py sandbox_setup

# A person reads `make run`'s console: plain-text log lines unless LOG_FORMAT says otherwise.
run: $(STAMP) sandbox
	$(PY) manage.py migrate --noinput
	$(PY) manage.py ensure_local_user
	LOG_FORMAT=$${LOG_FORMAT:-text} $(PY) manage.py run_local

# Production-shaped, on this machine: nginx in front of WORKERS Daphne workers, the task
# worker and the consolidation loop, on PostgreSQL and Redis (docs/deploy.md). `--check` says
# what is missing (nginx, PostgreSQL, Redis) before anything else touches the database.
# A fresh PostgreSQL server has no database of DATABASE_URL's name: the check creates it.
WORKERS ?= 2
CLUSTER_PORT ?= 8080
cluster: $(STAMP)
	$(PY) manage.py run_cluster --check --create-database
	$(PY) manage.py migrate --noinput
	$(PY) manage.py ensure_local_user --url http://127.0.0.1:$(CLUSTER_PORT)/
	$(PY) manage.py run_cluster --workers $(WORKERS) --port $(CLUSTER_PORT)

# The suite spread over PYTEST_WORKERS processes (pytest-xdist; docs/testing.md says what each
# keeps to itself). Most of its time is spent waiting on servers and browsers, so more workers
# than cores pays. PYTEST_ARGS narrows it (`PYTEST_ARGS="tests/browser -k chat"`); `-n0` in
# PYTEST_ARGS runs it in one process. The time printed at the end includes the install.
# `--maxschedchunk 2`: tests are handed out two at a time as workers free up. By default each
# worker is first handed a quarter of its share at once, so one worker took every browser
# test and ran for twice as long as the other three.
# Bytecode is cached even where PYTHONDONTWRITEBYTECODE is set: every worker and server a test
# starts would otherwise compile its modules again (and pytest rewrite every test module).
# `--dist load` hands out tests by index. Not loadscope/loadfile/loadgroup: they key tests by
# node id, and the 30 schemathesis tests share one (tests/sessions_app/web/api/
# test_openapi_conformance.py), so 29 of them would silently not run.
PYTEST_WORKERS ?= 4
PYTEST_PARALLEL := -n $(PYTEST_WORKERS) --dist load --maxschedchunk 2
test:
	@start=$$(date +%s); status=0; \
	$(MAKE) --no-print-directory venv sandbox && \
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest $(PYTEST_PARALLEL) $(PYTEST_ARGS) || status=$$?; \
	echo "== make test took $$(( $$(date +%s) - start )) s (install included)"; \
	exit $$status

# The suite three times in a row while busy processes keep every core loaded: a test that
# passes only on an idle machine fails here. Fails if any run fails; PYTEST_ARGS narrows it.
test-stress: $(STAMP)
	$(PY) scripts/cpu_burn.py --runs 3 -- $(PY) -m pytest $(PYTEST_PARALLEL) $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) bench/store_bench.py

# The peer of the turn benchmark lives in a virtualenv of its own: openai-agents requires
# websockets<17, the app pins websockets 17. BENCH_ARGS passes options, e.g.
# `make bench-turns BENCH_ARGS="--config one --sessions 50"`.
PEER_VENV := bench/.venv-peer
PEER_STAMP := $(PEER_VENV)/.installed

$(PEER_STAMP): bench/requirements.txt
	test -x $(PEER_VENV)/bin/python || $(PYTHON) -m venv $(PEER_VENV)
	$(PEER_VENV)/bin/python -m pip install --quiet -r bench/requirements.txt
	touch $(PEER_STAMP)

bench-turns: $(STAMP) $(PEER_STAMP)
	$(PY) bench/turn_load.py --peer-python $(PEER_VENV)/bin/python $(BENCH_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports --no-logo
	$(PY) scripts/floors_picture.py --check

migrations-check: $(STAMP)
	$(PY) manage.py makemigrations --check --dry-run

# Pictures of the web chat (desktop and phone, light and dark) for docs/screenshots/.
screenshots: $(STAMP)
	$(PY) scripts/screenshots.py
