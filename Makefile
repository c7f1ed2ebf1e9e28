# Two commands do everything on a fresh machine (Python >= 3.11):
#   make demo   installs kernelfarm into .venv and runs a real tuning job on the embedded stack
#   make test   installs it (with test tools) and runs the test suite
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: demo test lint install chromium chromium

$(BIN)/kernelfarm: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

install: $(BIN)/kernelfarm

demo: install
	$(BIN)/kernelfarm demo

# The test suite also runs the model profiler on tiny models on the CPU: it needs the `profile` extra
# (PyTorch and transformers), which `make demo` does without.
$(VENV)/.profile-extra: $(BIN)/kernelfarm
	$(BIN)/pip install --quiet -e '.[dev,profile]'
	touch $@

# The browser tests (tests/ui) drive Debian's Chromium (Playwright's own browser download does not work
# on these machines). Installed here when missing and we are root with apt; never fatal: without it the
# browser tests skip and say why.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium for the browser tests"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1 \
	      || echo "chromium could not be installed: the browser tests will skip"; \
	  else echo "no chromium and not root: the browser tests will skip"; fi; }

# Three worker processes (pytest-xdist), each test file on one of them (its module-scoped farm is started
# once): most tests wait on the farm processes they start, so on 2 cores three at a time took 13 min
# where one at a time took 22.6. Each worker has its own database and Redis database.
TEST_WORKERS ?= 3

test: install $(VENV)/.profile-extra chromium
	OMP_NUM_THREADS=1 $(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile

lint: install
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy -p kernelfarm -p tests
