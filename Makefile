# Two commands do everything on a fresh machine (Python >= 3.11):
#   make demo   installs kernelfarm into .venv and runs a real tuning job on the embedded stack
#   make test   installs it (with test tools) and runs the test suite
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: demo test lint install

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

test: install $(VENV)/.profile-extra
	OMP_NUM_THREADS=1 $(BIN)/pytest -q

lint: install
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy -p kernelfarm
