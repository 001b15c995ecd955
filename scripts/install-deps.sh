#!/bin/sh
# Install the Debian packages nicpick needs to build and test, if missing.
# `install-deps.sh static`: only what `make static` needs.
set -eu
# (the static nicpick's dependencies come from Debian's sources, and
# OpenSSL's Configure needs perl's modules; the smoke companion beside it
# links Debian's own static archives)
static="gcc libc6-dev linux-libc-dev make pkg-config libnl-3-dev libnl-route-3-dev libnl-genl-3-dev libcurl4-openssl-dev libjansson-dev libyaml-dev
musl-tools dpkg-dev debian-archive-keyring ca-certificates bison flex cmake perl"
need="$static
libcmocka-dev python3-pytest python3-kubernetes python3-h2 python3-jsonschema python3-yaml python3-pytest-timeout iproute2 nftables openssl valgrind
curl unzip nodejs npm buildah podman runc clang-14 libclang-rt-14-dev"
[ "${1:-}" = static ] && need=$static
missing=""
for p in $need; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed' || missing="$missing $p"
done
# A node/npm from outside Debian is fine too.
case " $missing " in *" npm "*) command -v npm >/dev/null 2>&1 && missing=$(echo "$missing" | sed 's/ npm//; s/ nodejs//');; esac
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "nicpick: missing packages:$missing — run as root or install them" >&2
	exit 1
fi
echo "nicpick: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends $missing >/dev/null
