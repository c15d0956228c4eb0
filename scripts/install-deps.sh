#!/bin/sh
# Install the system packages perfweave needs, when missing (Debian/Ubuntu, as root),
# and make sure the Performance Co-Pilot daemon pmcd is running.
# Everything is installed without recommends: Debian's libpapi-dev recommends pcp.
# libblas-dev, liblapack-dev, liblapacke-dev, libopenblas0-pthread, libfftw3-dev: the math
# library module's tests (reference BLAS/LAPACK and OpenBLAS as the two libblas.so.3
# alternatives, CBLAS, LAPACKE, FFTW3 with its MPI-less legacy Fortran interface);
# libfftw3-mpi-dev (FFTW's MPI interface, built against Open MPI only),
# libscalapack-openmpi-dev and libscalapack-mpich-dev (ScaLAPACK with its BLACS, for each
# MPI), libopenblas64-pthread-dev (OpenBLAS with 64-bit integers: ILP64; its
# libopenblas64.a is the tests' static OpenBLAS, Debian 12 having no other).
# libunwind8: the sampler dlopens libunwind.so.8 (stacks through code without frame
# pointers); libunwind-dev: its header, for the build.
#
# pcp's postinst runs "systemctl daemon-reload" / "systemctl start pmcd.service"
# whenever systemctl exists (or "invoke-rc.d pmcd start" otherwise), ignoring
# policy-rc.d. Where systemd is not PID 1 that systemctl call fails, the postinst
# exits 1 and dpkg leaves pcp half-configured (iF), which breaks later apt-get runs.
# So, on such machines, pcp is installed (and any unfinished configuration is
# completed) with no-op systemctl and invoke-rc.d stand-ins first in PATH; pmcd is
# then started below with its init script.
#
# slurm-wlm and munge (the test suite's one-node Slurm) have the same kind of postinst
# ("invoke-rc.d munge start || exit 1", the same for slurmd and slurmctld): they are
# installed with the same stand-ins, so that no system-wide daemon is started; the tests
# start their own munged, slurmctld and slurmd with a configuration in a temporary
# directory (tests/runtime/slurm.py).
set -e
# groff-base, man-db, zsh, fish: the tests read the man page and source each completion script
PKGS="gcc g++ make cmake python3 python3-venv python3-dev binutils gfortran
openmpi-bin libopenmpi-dev mpich libmpich-dev numactl python3-mpi4py libunwind8 libunwind-dev libpapi-dev papi-tools chromium
libblas-dev liblapack-dev liblapacke-dev libopenblas0-pthread libfftw3-dev
libfftw3-mpi-dev libscalapack-openmpi-dev libscalapack-mpich-dev libopenblas64-pthread-dev
groff-base man-db zsh fish"
# installed with no-op systemctl / invoke-rc.d (see above)
NOINIT_PKGS="pcp libpcp3 libpcp3-dev slurm-wlm munge"

installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}
missing=""
missing_noinit=""
for p in $PKGS; do
    installed "$p" || missing="$missing $p"
done
for p in $NOINIT_PKGS; do
    installed "$p" || missing_noinit="$missing_noinit $p"
done
root=false
[ "$(id -u)" = 0 ] && root=true

# PATH for maintainer scripts (apt-get sets it from DPkg::Path, whose default is
# /usr/sbin:/usr/bin:/sbin:/bin): without systemd as PID 1, systemctl and invoke-rc.d
# come first as no-ops (pcp's postinst and prerm fail otherwise).
shim=""
trap '[ -z "$shim" ] || rm -rf "$shim"' 0
maint_path() {
    maint_PATH=/usr/sbin:/usr/bin:/sbin:/bin
    [ -d /run/systemd/system ] && return
    if [ -z "$shim" ]; then
        shim=$(mktemp -d "${TMPDIR:-/tmp}/perfweave-noinit.XXXXXX")
        for c in systemctl invoke-rc.d; do
            printf '#!/bin/sh\nexit 0\n' >"$shim/$c"
            chmod 755 "$shim/$c"
        done
    fi
    maint_PATH=$shim:$maint_PATH
}

# Complete package configuration left unfinished (e.g. pcp at iF from an earlier
# plain install), so that dpkg --audit is clean and apt-get works again.
dpkg_repair() {
    maint_path
    PATH=$maint_PATH dpkg --configure -a >/dev/null
}
if $root && { [ -n "$(dpkg --audit 2>/dev/null)" ] ||
              [ -n "$(ls -A /var/lib/dpkg/updates 2>/dev/null)" ]; }; then
    echo "perfweave: completing interrupted package configuration (dpkg --configure -a)"
    dpkg_repair
    missing_noinit=""
    for p in $NOINIT_PKGS; do
        installed "$p" || missing_noinit="$missing_noinit $p"
    done
fi

if [ -n "$missing$missing_noinit" ]; then
    if ! $root; then
        echo "perfweave: missing system packages:$missing$missing_noinit" >&2
        echo "perfweave: install them as root (apt-get install --no-install-recommends$missing$missing_noinit)" >&2
        exit 1
    fi
    echo "perfweave: installing system packages:$missing$missing_noinit"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    if [ -n "$missing" ]; then
        apt-get install -y -qq --no-install-recommends $missing >/dev/null
    fi
    if [ -n "$missing_noinit" ]; then
        maint_path
        if ! apt-get install -y -qq --no-install-recommends \
                -o DPkg::Path="$maint_PATH" $missing_noinit >/dev/null; then
            # leave dpkg consistent even if the install failed half-way
            dpkg_repair || true
            for p in $NOINIT_PKGS; do
                installed "$p" || {
                    echo "perfweave: installing$missing_noinit failed" >&2
                    exit 1
                }
            done
        fi
    fi
fi

# pmcd: start it when it does not answer (cheap check when it is already up).
pcp_up() {
    pminfo -f kernel.all.cpu.user >/dev/null 2>&1
}
if ! pcp_up; then
    if ! $root; then
        echo "perfweave: pmcd is not running (as root: /etc/init.d/pmcd start); PCP metrics unavailable" >&2
    else
        echo "perfweave: starting pmcd"
        /etc/init.d/pmcd start >/dev/null 2>&1 || true
        i=0
        until pcp_up; do
            i=$((i + 1))
            if [ $i -gt 20 ]; then
                echo "perfweave: could not start pmcd (/etc/init.d/pmcd start; see /var/log/pcp/pmcd/pmcd.log); PCP metrics unavailable" >&2
                break
            fi
            sleep 1
        done
    fi
fi
exit 0
