# Two commands from a fresh clone: `make demo` and `make test`. Both bootstrap .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test faults lint bench bench-quick clean assets

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

# The demo is the Harbor Light Hotel: its profile and knowledge base are examples/demo/.
demo: $(STAMP)
	@rm -f demo.db
	FRONTDESK_PROFILE=examples/demo/frontdesk.toml FRONTDESK_DATABASE_URL=sqlite+aiosqlite:///demo.db \
		FRONTDESK_REPORTS_PATH=reports $(BIN)/frontdesk demo

# Two workers: most tests wait on subprocesses, real-time audio and databases, not the CPU
# (18 min on one, 14 on two, on a loaded 2-core machine). Every test passes with a neighbour.
test: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -n 2

# The database-fault suite alone (docs/reliability.md): a private Postgres killed and restarted,
# SQLite on a full 4 MB tmpfs, clock steps under libfaketime. `make test` runs it too.
faults: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -m faults

# ruff, then import-linter's contracts: the layers of docs/design.md (pyproject [tool.importlinter]).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python bench/run.py

bench-quick: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python bench/run.py --quick

# The web console's front-end assets, from the npm registry through package-lock.json. The
# copies are committed, so the wheel ships them: no npm at install time, no CDN at run time.
WEB_VENDOR := agents/programs/web/static/vendor
assets:
	npm ci --ignore-scripts --no-audit --no-fund
	mkdir -p $(WEB_VENDOR)
	cp node_modules/htmx.org/dist/htmx.min.js node_modules/htmx-ext-sse/dist/sse.min.js \
	   node_modules/chart.js/dist/chart.umd.min.js \
	   node_modules/livekit-client/dist/livekit-client.umd.js $(WEB_VENDOR)/
	cp node_modules/htmx.org/LICENSE $(WEB_VENDOR)/htmx.LICENSE.txt
	cp node_modules/htmx-ext-sse/LICENSE $(WEB_VENDOR)/htmx-ext-sse.LICENSE.txt
	cp node_modules/chart.js/LICENSE.md $(WEB_VENDOR)/chart.js.LICENSE.txt
	cp node_modules/livekit-client/LICENSE $(WEB_VENDOR)/livekit-client.LICENSE.txt

clean:
	rm -rf $(VENV) build *.egg-info demo.db frontdesk.db
