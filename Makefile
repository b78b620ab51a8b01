# Two entry points on a fresh machine (see README): `make demo` and `make test`.
# Each creates .venv itself. torch is pinned to the local CPU build (2.13.0); every other
# package to the versions in constraints.txt (`make constraints` re-pins them to .venv).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.hiera-installed

.PHONY: demo test test-all lint bench clean constraints

EXTRAS := data,test,train,bench,sets,link,ray,fast,client,langchain,llamaindex,mcp
# uv installs the same pins as pip in 88 s instead of about 150 (parallel downloads and byte-compiling on 2 cores);
# torch 2.13.0+cpu comes from pip's find-links (PIP_FIND_LINKS or pip's config), which uv does not read by itself.
# Without find-links (uv would take the CUDA torch from PyPI) or without uv (not installable, or it fails) pip
# does the same install.
FIND_LINKS := $(or $(PIP_FIND_LINKS),$(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null))
# Byte-compile what is installed (uv --compile-bytecode; pip does by default): with PYTHONDONTWRITEBYTECODE=1 (set
# on this machine and in CI) nothing else ever compiles it, and importing from source made imports 2× slower and
# the suite 12:05 instead of about 10:30 on CI.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	( [ -n "$(FIND_LINKS)" ] && $(BIN)/pip install -q -c constraints.txt uv && \
		UV_FIND_LINKS="$(FIND_LINKS)" $(BIN)/uv pip install -q --python $(BIN)/python --compile-bytecode \
		-c constraints.txt torch==2.13.0 -e ".[$(EXTRAS)]" ) || \
	( echo "uv unavailable: installing with pip" && $(BIN)/pip install -q --upgrade pip && \
		$(BIN)/pip install -q -c constraints.txt torch==2.13.0 && \
		$(BIN)/pip install -q -c constraints.txt -e ".[$(EXTRAS)]" )
	touch $(STAMP)

# After a deliberate upgrade in .venv: pin constraints.txt to it (its header comment is kept).
constraints:
	{ grep '^#' constraints.txt; $(BIN)/pip freeze --exclude-editable | grep -v '^#' | sed 's/+cpu$$//'; } \
		> constraints.txt.new && mv constraints.txt.new constraints.txt

demo: $(STAMP)
	$(BIN)/hiera demo

# The browser test needs Debian's chromium; install it when we can (root), else it is skipped.
# lint-imports checks the layers in pyproject.toml ([tool.importlinter]): a new import knot fails here.
test: $(STAMP)
	@command -v chromium >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || \
		(apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1) || \
		echo "note: chromium not installed; the browser test will be skipped"
	$(BIN)/ruff check src tests bench
	$(BIN)/lint-imports
	OMP_NUM_THREADS=1 $(BIN)/pytest -q

# Slow, real-data tests too (minutes).
test-all: $(STAMP)
	HIERA_SLOW=1 $(BIN)/pytest -q

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
