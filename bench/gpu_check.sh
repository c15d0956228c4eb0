#!/usr/bin/env bash
# The device check of issue 38 (docs/gpu.md "The device check"): on a machine with an
# NVIDIA GPU, nvcc and the CUDA toolkit (cuFFT), no network, maybe no MPI, from a copy of
# the working tree:
#   1. builds bench/programs/gpu_check.cu (nvcc; with -DUSE_MPI through mpicxx where an
#      MPI is there): kernels of known duration (clock64 spin, timed by CUDA events),
#      copies of known bytes (H2D and D2H, pageable and pinned), a cuFFT 3D transform;
#   2. runs it bare, then under `perfweave run` (one process) and, where mpirun exists,
#      under `perfweave run -- mpirun -n 2`, and checks what perfweave recorded against
#      what the program printed (bench/gpu_check.py check: kernel launches and copy
#      counts and bytes exact, kernel times against the CUDA events, the cuFFT plan's
#      executes and flops, NVML power readings present);
#   3. runs it ROUNDS times bare and under perfweave, interleaved, and prints the host time
#      added per kernel launch and per copy (bench/gpu_check.py overhead);
#   4. prints the report's GPU, math-library and node-timeline parts, for docs/gpu.md.
# Exit status: 0 when every check passed, 1 on any mismatch, 2 when it cannot run
# (no nvcc, no GPU, no perfweave).
#
# perfweave: $PERFWEAVE if set, else the worktree's .venv/bin/perfweave, else `perfweave`
# on PATH, else built here offline from wheels: $GPU_CHECK_WHEELS (default
# bench/gpu_wheels), which `bench/gpu_check.sh --wheels` fills on a machine with network
# (perfweave's wheel and numpy, pandas, tqdm for this Python; the device machine's Python
# must be the same minor version).
#
# Usage: bench/gpu_check.sh [--wheels] [--rounds R] [--kernels N] [--spin-us US]
#        [--copies C] [--bytes B] [--fft N] [--execs E] [--launches L]
# Environment: CUDA_HOME (nvcc), GPU_CHECK_DIR (work folder, default a new temporary
# one), GPU_CHECK_CUDART (shared or static, default shared), MPICXX, MPIRUN.
set -u -o pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=5 KERNELS=50 SPIN_US=1000 COPIES=8 BYTES=$((16 << 20)) FFT=128 EXECS=5 LAUNCHES=20000
WHEELS=${GPU_CHECK_WHEELS:-$ROOT/bench/gpu_wheels}
make_wheels=0
while [ $# -gt 0 ]; do
    case $1 in
    --wheels) make_wheels=1 ;;
    --rounds) ROUNDS=$2; shift ;;
    --kernels) KERNELS=$2; shift ;;
    --spin-us) SPIN_US=$2; shift ;;
    --copies) COPIES=$2; shift ;;
    --bytes) BYTES=$2; shift ;;
    --fft) FFT=$2; shift ;;
    --execs) EXECS=$2; shift ;;
    --launches) LAUNCHES=$2; shift ;;
    *) echo "gpu_check.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

say() { printf '== %s\n' "$*"; }
cannot() { printf 'gpu_check.sh: cannot run: %s\n' "$*" >&2; exit 2; }

if [ "$make_wheels" = 1 ]; then # on a machine with network: what the device needs
    mkdir -p "$WHEELS" || exit 2
    python3 -m pip wheel --no-deps -w "$WHEELS" "$ROOT" &&
        python3 -m pip download -d "$WHEELS" numpy pandas tqdm || exit 2
    say "wheels in $WHEELS for $(python3 -c 'import sys; print(sys.version.split()[0])')"
    exit 0
fi

WORK=${GPU_CHECK_DIR:-$(mktemp -d /tmp/gpu_check.XXXXXX)}
mkdir -p "$WORK" || exit 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
say "work folder $WORK"

# ---- CUDA
NVCC=""
for c in "${CUDA_HOME:-/nonexistent}/bin/nvcc" /usr/local/cuda/bin/nvcc "$(command -v nvcc)"; do
    if [ -n "$c" ] && [ -x "$c" ]; then NVCC=$c; break; fi
done
[ -n "$NVCC" ] || cannot "no nvcc (set CUDA_HOME)"
"$NVCC" --version | tail -1
if command -v nvidia-smi >/dev/null; then
    nvidia-smi -L || cannot "nvidia-smi sees no GPU"
fi

# ---- perfweave
PW=${PERFWEAVE:-}
[ -z "$PW" ] && [ -x "$ROOT/.venv/bin/perfweave" ] && PW=$ROOT/.venv/bin/perfweave
[ -z "$PW" ] && command -v perfweave >/dev/null && PW=$(command -v perfweave)
if [ -z "$PW" ]; then
    [ -d "$WHEELS" ] || cannot "no perfweave and no wheels in $WHEELS (bench/gpu_check.sh --wheels)"
    say "installing perfweave offline from $WHEELS"
    if ! python3 -m venv "$WORK/venv" ||
        ! "$WORK/venv/bin/pip" install -q --no-index --find-links "$WHEELS" perfweave; then
        cannot "perfweave could not be installed from $WHEELS"
    fi
    PW=$WORK/venv/bin/perfweave
fi
PY=$(dirname "$PW")/python
[ -x "$PY" ] || PY=python3
"$PY" -c "import perfweave" || cannot "$PY cannot import perfweave"
say "perfweave $("$PW" --version 2>/dev/null | head -1) ($PW)"

# ---- build
ARCH=()
"$NVCC" -arch=native --version >/dev/null 2>&1 && ARCH=(-arch=native)
CUDART=${GPU_CHECK_CUDART:-shared}
SRC=$ROOT/bench/programs/gpu_check.cu
"$NVCC" -O2 "${ARCH[@]}" -cudart "$CUDART" -o "$WORK/gpu_check" "$SRC" -lcufft ||
    cannot "nvcc could not build $SRC"
MPICXX=${MPICXX:-$(command -v mpicxx || command -v mpicxx.openmpi || command -v mpicxx.mpich || true)}
MPIRUN=${MPIRUN:-$(command -v mpirun || command -v mpirun.openmpi || command -v mpirun.mpich || true)}
MPI_OK=0
if [ -n "$MPICXX" ] && [ -n "$MPIRUN" ]; then
    if "$NVCC" -O2 "${ARCH[@]}" -cudart "$CUDART" -ccbin "$MPICXX" -DUSE_MPI \
        -o "$WORK/gpu_check_mpi" "$SRC" -lcufft; then
        MPI_OK=1
    else
        say "no MPI build (nvcc -ccbin $MPICXX failed): the 2-rank check is left out"
    fi
else
    say "no MPI here (mpicxx, mpirun): the 2-rank check is left out"
fi
ARGS=("$KERNELS" "$SPIN_US" "$COPIES" "$BYTES" "$FFT" "$EXECS" "$LAUNCHES")

status=0
# ---- bare, then one process under perfweave
say "bare run"
"$WORK/gpu_check" "${ARGS[@]}" | tee "$WORK/bare.out" || cannot "the program fails bare"
say "perfweave run, one process"
"$PW" run -o "$WORK/exp1" -- "$WORK/gpu_check" "${ARGS[@]}" | tee "$WORK/exp1.out"
rc=$?
[ "$rc" = 0 ] || { echo "FAIL  perfweave run exit status $rc"; status=1; }
"$PY" "$ROOT/bench/gpu_check.py" check "$WORK/exp1" "$WORK/exp1.out" 1 || status=1

# ---- two ranks
if [ "$MPI_OK" = 1 ]; then
    LAUNCH=("$MPIRUN" -n 2)
    "$MPIRUN" --version 2>&1 | grep -qi "open mpi" && LAUNCH=("$MPIRUN" --oversubscribe -n 2)
    say "perfweave run, 2 ranks (${LAUNCH[*]})"
    "$PW" run -o "$WORK/exp2" -- "${LAUNCH[@]}" "$WORK/gpu_check_mpi" "${ARGS[@]}" |
        tee "$WORK/exp2.out"
    rc=$?
    [ "$rc" = 0 ] || { echo "FAIL  perfweave run (2 ranks) exit status $rc"; status=1; }
    "$PY" "$ROOT/bench/gpu_check.py" check "$WORK/exp2" "$WORK/exp2.out" 2 || status=1
fi

# ---- overhead per launch and per copy: bare and measured rounds interleaved
say "overhead: $ROUNDS rounds, $LAUNCHES launches and copies each"
SMALL=(1 10 1 4096 16 1 "$LAUNCHES")
bare=() measured=()
for r in $(seq 1 "$ROUNDS"); do
    "$WORK/gpu_check" "${SMALL[@]}" >"$WORK/oh_bare$r.out" || status=1
    "$PW" run -o "$WORK/oh_exp$r" -- "$WORK/gpu_check" "${SMALL[@]}" >"$WORK/oh_pw$r.out" ||
        status=1
    bare+=("$WORK/oh_bare$r.out")
    measured+=("$WORK/oh_pw$r.out")
done
"$PY" "$ROOT/bench/gpu_check.py" overhead --bare "${bare[@]}" --measured "${measured[@]}" ||
    status=1

# ---- the report's parts, for the record
say "report (one process): GPU activity, math libraries, node timeline"
"$PW" report --full "$WORK/exp1" | grep -A40 -E "^(GPU|Math|Node timeline)" | head -150

if [ "$status" = 0 ]; then say "ALL CHECKS PASSED"; else say "SOME CHECKS FAILED"; fi
exit "$status"
