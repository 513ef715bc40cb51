# SPDX-License-Identifier: Apache-2.0
# spnn: every target creates the virtualenv (.venv) on first use; nothing to remember.

PYTHON  ?= python3
VENV    ?= .venv
PY      := $(VENV)/bin/python
SPNN    := $(VENV)/bin/spnn
comma   := ,
EXTRAS  ?= dev
STAMP   := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))
MLSTAMP := $(VENV)/.installed-dev-ml
SIM     ?=
WAVES   ?= 0
BLOCK   ?= pwl
JOBS    ?= 2
N       ?= 1000000

.PHONY: help verilog sim soak test test-fast bench synth waves-check waves-update clean distclean

help:
	@echo "spnn make targets"
	@echo "  make verilog      emit every block's default Verilog + manifests into build/verilog/"
	@echo "  make test         all tests: pure Python + cocotb under Icarus and Verilator"
	@echo "  make soak BLOCK=spmv N=1000000   random jobs (back-pressure, resets) vs golden, native"
	@echo "                    (EXTRAS=dev,ml also installs PyTorch for the float-reference tests)"
	@echo "  make test-fast    everything that needs no HDL simulator or synthesis tool (< 1 min)"
	@echo "  make sim BLOCK=pwl [SIM=icarus|verilator] [WAVES=1]"
	@echo "                    one block's tests (WAVES=1 dumps waveforms under build/sim/)"
	@echo "  make bench        benchmarks -> build/bench/*.json, *.md (installs the ml extra)"
	@echo "  make synth        every block: Yosys xc7 resources + nextpnr ECP5 Fmax -> build/bench/synth.md"
	@echo "  make waves-check  rerun the waveform regressions against tb/golden/*.trace"
	@echo "  make waves-update rewrite tb/golden/*.trace and print what changed"
	@echo "  make clean        remove build/ (keeps .venv); make distclean also removes .venv"

$(VENV)/.installed-%: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[$(subst -,$(comma),$*)]'
	@touch $@

verilog: $(STAMP)
	$(SPNN) verilog --all -o build/verilog

test: $(STAMP)
	@mkdir -p build
	$(PY) -m pytest -n $(JOBS) -q --junitxml=build/test-results.xml tb

test-fast: $(STAMP)
	SPNN_FAST=1 $(PY) -m pytest -n $(JOBS) -q -m "not rtl and not synth and not slow" tb

sim: $(STAMP)
	SIM=$(SIM) WAVES=$(WAVES) $(PY) -m pytest -q tb/$(BLOCK)

soak: $(STAMP)
	@mkdir -p build/bench
	$(PY) -m scripts.soak $(BLOCK) -n $(N) -j $(JOBS) $(if $(SIM),--sim $(SIM)) --report build/bench/soak_$(BLOCK).json

bench: $(MLSTAMP)
	@mkdir -p build/bench
	@set -e; for script in scripts/bench_*.py; do \
	  name=$$(basename $$script .py); echo "== python -m scripts.$$name"; \
	  $(PY) -m scripts.$$name; done

synth: $(STAMP)
	$(PY) -m scripts.bench_synth --reuse --shells --docs

waves-check: $(STAMP)
	$(PY) -m tb.waves check $(if $(SIM),--sim $(SIM))

waves-update: $(STAMP)
	$(PY) -m tb.waves update $(if $(SIM),--sim $(SIM))

clean:
	rm -rf build

distclean: clean
	rm -rf $(VENV)
