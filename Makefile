# Two commands from a fresh clone: `make demo` and `make test`. Both bootstrap .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench bench-quick clean

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

test: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python bench/run.py

bench-quick: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python bench/run.py --quick

clean:
	rm -rf $(VENV) build *.egg-info demo.db frontdesk.db
