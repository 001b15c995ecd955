#!/bin/sh
# The krew archive of `kubectl nicpick`: kubectl-nicpick (the static nicpick
# of `make static` under its plugin name) in a reproducible tar.gz, named as
# deploy/krew/nicpick.yaml's uri names it.  Prints the archive's path and
# sha256; with --manifest FILE, also writes the sha256 into FILE, a copy of
# deploy/krew/nicpick.yaml (krew checks it, also with --archive).
#   scripts/krew-archive.sh [--manifest build/krew/nicpick.yaml] build/static/nicpick build/krew
set -eu
manifest=
if [ "${1:-}" = --manifest ]; then
	manifest=$2
	shift 2
fi
if [ $# -ne 2 ]; then
	echo "usage: $0 [--manifest FILE] NICPICK_BINARY OUT_DIR" >&2
	exit 2
fi
bin=$1 out=$2
root=$(cd "$(dirname "$0")/.." && pwd)
version=$(cat "$root/VERSION")
[ -f "$bin" ] || { echo "krew-archive: $bin: no such file (run make static)" >&2; exit 2; }
mkdir -p "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp "$bin" "$stage/kubectl-nicpick"
chmod 0755 "$stage/kubectl-nicpick"
archive="$out/kubectl-nicpick_v${version}_linux_amd64.tar.gz"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$stage" -cf - kubectl-nicpick |
	gzip -n -9 >"$archive"
sum=$(sha256sum "$archive" | cut -d' ' -f1)
if [ -n "$manifest" ]; then
	sed -i "s/^\(      sha256: \)\"[0-9a-f]\{64\}\"/\1\"$sum\"/" "$manifest"
	grep -q "sha256: \"$sum\"" "$manifest" || { echo "krew-archive: no sha256 line in $manifest" >&2; exit 1; }
fi
echo "$archive $sum"
