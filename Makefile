# perfweave: `make demo` sets everything up and profiles the bundled example;
# `make test` runs the whole suite. Both install missing system packages first.
VENV   ?= .venv
PY     := $(VENV)/bin/python
PW     := $(VENV)/bin/perfweave
RANKS  ?= 4
SOURCES := $(shell find runtime include python -type f -not -name '*.pyc') \
           CMakeLists.txt pyproject.toml

# Open MPI refuses to run as root without these; harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1

.PHONY: all deps install demo lint format test bench clean

all: install

deps:
	@sh scripts/install-deps.sh

$(VENV)/bin/python:
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip

# CUPTI's and CUDA's headers (the Python wheels': no CUDA toolkit needed) for the gpu module
# and the tests' fake CUPTI (docs/gpu.md); headers only, nothing of them is linked
CUDA_HEADERS := "nvidia-cuda-cupti-cu12==12.9.*" "nvidia-cuda-runtime-cu12==12.9.*" \
                "nvidia-cuda-nvcc-cu12==12.9.*"

# the stamp takes the time the install began: a source edited while it runs is newer, so
# the next install builds it again
$(VENV)/.installed: $(VENV)/bin/python $(SOURCES)
	touch $@.begun
	$(PY) -m pip install -q $(CUDA_HEADERS) || echo "perfweave: no CUDA headers from PyPI: the gpu module is built without CUPTI (docs/gpu.md)"
	PERFWEAVE_CUDA_INCLUDE="$$($(PY) scripts/cuda_headers.py)" $(PY) -m pip install -q ".[test]"
	mv $@.begun $@

install: deps $(VENV)/.installed

examples/build/stencil: examples/stencil.c
	mkdir -p examples/build
	mpicc.openmpi -O2 -g -o $@ $< -lm

demo: install examples/build/stencil
	rm -rf examples/build/demo.pwx
	$(PW) run --trace -o examples/build/demo.pwx -- mpirun.openmpi --oversubscribe \
	    -n $(RANKS) examples/build/stencil
	$(PW) analyze examples/build/demo.pwx
	$(PW) report examples/build/demo.pwx

# The style, checked by `make test`: ruff's lint (pyflakes' checks, the 100-column limit)
# and format (pyproject.toml [tool.ruff]) over the Python, clang-format (.clang-format)
# over the C. `make format` applies both. The test programs (tests/runtime/programs) keep
# their layout: tests find their call lines by markers.
PY_STYLED := python tests bench scripts runtime packaging
C_STYLED := $(shell find runtime include bench/programs examples -name '*.[ch]' -not -path '*/build/*')
lint: install
	$(PY) -m ruff check $(PY_STYLED)
	$(PY) -m ruff format --check $(PY_STYLED)
	$(VENV)/bin/clang-format --dry-run --Werror $(C_STYLED)

format: install
	$(PY) -m ruff format $(PY_STYLED)
	$(VENV)/bin/clang-format -i $(C_STYLED)

test: install lint
	$(PY) -m pytest -q --durations=30 tests

bench: install
	$(PY) bench/mpi_overhead.py
	$(PY) bench/trace_overhead.py
	$(PY) bench/analysis_throughput.py
	$(PY) bench/otf2_import.py

clean:
	rm -rf build examples/build .pytest_cache
