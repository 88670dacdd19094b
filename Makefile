# Every target creates or updates the virtual environment it needs, so each works on a fresh clone.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed

.PHONY: run test install clean

run: $(STAMP)
	$(BIN)/topoopt solve instances/testbed-12.json

test: $(STAMP)
	$(BIN)/python -m pytest -q

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing topoopt-ilp and its dependencies into $(VENV) (log: $(VENV)/install.log)"
	@$(BIN)/python -m pip install -q --upgrade pip > $(VENV)/install.log 2>&1 || (cat $(VENV)/install.log; exit 1)
	@$(BIN)/python -m pip install -q -e '.[test]' >> $(VENV)/install.log 2>&1 || (cat $(VENV)/install.log; exit 1)
	@touch $(STAMP)

clean:
	rm -rf $(VENV) build *.egg-info
