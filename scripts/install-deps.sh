#!/bin/sh
# Install the system packages perfweave needs, when missing (Debian/Ubuntu, as root).
# PAPI is installed without recommends: Debian's libpapi-dev recommends pcp, whose
# install script fails where systemd is not PID 1.
set -e
PKGS="gcc g++ make cmake python3 python3-venv python3-dev binutils gfortran
openmpi-bin libopenmpi-dev mpich libmpich-dev libunwind-dev libpapi-dev papi-tools"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "perfweave: missing system packages:$missing" >&2
    echo "perfweave: install them as root (apt-get install --no-install-recommends$missing)" >&2
    exit 1
fi
echo "perfweave: installing system packages:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing >/dev/null
