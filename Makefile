# Two entry points on a fresh machine (see README): `make demo` and `make test`.
# Each creates .venv itself. torch is pinned to the local CPU build (2.13.0); every other
# package to the versions in constraints.txt (`make constraints` re-pins them to .venv).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.hiera-installed

.PHONY: demo test test-all lint bench clean constraints

# pip byte-compiles what it installs (67 of the install's 136 s on 2 cores). Keep it: with --no-compile and
# PYTHONDONTWRITEBYTECODE=1 (set on this machine and in CI) every process imports from source, which made
# imports 2× slower and the suite 12:05 instead of about 10:30 on CI.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e ".[data,test,train,bench,sets,link,ray,fast]"
	touch $(STAMP)

# After a deliberate upgrade in .venv: pin constraints.txt to it (its header comment is kept).
constraints:
	{ grep '^#' constraints.txt; $(BIN)/pip freeze --exclude-editable | grep -v '^#' | sed 's/+cpu$$//'; } \
		> constraints.txt.new && mv constraints.txt.new constraints.txt

demo: $(STAMP)
	$(BIN)/hiera demo

# The browser test needs Debian's chromium; install it when we can (root), else it is skipped.
test: $(STAMP)
	@command -v chromium >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || \
		(apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1) || \
		echo "note: chromium not installed; the browser test will be skipped"
	$(BIN)/ruff check src tests bench
	OMP_NUM_THREADS=1 $(BIN)/pytest -q

# Slow, real-data tests too (minutes).
test-all: $(STAMP)
	HIERA_SLOW=1 $(BIN)/pytest -q

lint: $(STAMP)
	$(BIN)/ruff check src tests bench

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
