# Two commands for a newcomer: `make run` serves the web chat, `make test` runs the suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test bench lint migrations-check user venv screenshots

$(STAMP): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(PY) manage.py migrate --noinput
	$(PY) manage.py ensure_local_user
	$(PY) manage.py run_local

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) bench/store_bench.py

lint: $(STAMP)
	$(VENV)/bin/ruff check .

migrations-check: $(STAMP)
	$(PY) manage.py makemigrations --check --dry-run

# Pictures of the web chat (desktop and phone, light and dark) for docs/screenshots/.
screenshots: $(STAMP)
	$(PY) scripts/screenshots.py
