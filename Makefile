# flyasm: two commands on a fresh machine — `make demo` and `make test`. Each sets itself up.
PY ?= python3
SETUP_STAMP := .setup-done

.PHONY: setup demo test test-all tables clean

$(SETUP_STAMP): pyproject.toml tools/setup.sh
	bash tools/setup.sh
	@touch $(SETUP_STAMP)

setup: $(SETUP_STAMP)

demo: $(SETUP_STAMP)
	$(PY) -m flyasm.demo

test: $(SETUP_STAMP)
	$(PY) -m pytest -q -n 2 --dist loadgroup

test-all: $(SETUP_STAMP)
	$(PY) -m pytest -q -n 2 --dist loadgroup -m "slow or not slow"

tables: $(SETUP_STAMP)
	$(PY) tools/gen_isa_tables.py

clean:
	rm -rf $(SETUP_STAMP) .pytest_cache build out
