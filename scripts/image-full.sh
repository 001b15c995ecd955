#!/bin/sh
# `make image-full`: build the whole Dockerfile (build stage FROM debian:12
# running `make static`, then the release stage) where no registry can be
# reached: debian:12 is made locally with debootstrap (bookworm, minbase)
# and imported into the storage under build/image-full.  Slower than
# `make image` (a fresh Debian installs the toolchain, then builds the
# static dependencies from source): minutes, not seconds.
#
#   scripts/image-full.sh TAG VERSION REVISION
set -eu
tag=$1 version=$2 revision=$3
dir=build/image-full
mkdir -p "$dir"
for t in buildah podman debootstrap; do
	command -v "$t" >/dev/null || { echo "nicpick: $t is not installed" >&2; exit 1; }
done
"$(dirname "$0")/containers-env.sh" "$dir" >"$dir/env"
. "$dir/env"
# shellcheck disable=SC2086
if ! buildah $BUILDAH_OPTS inspect --type image docker.io/library/debian:12 >/dev/null 2>&1; then
	echo "nicpick: debootstrap bookworm into $dir/rootfs"
	rm -rf "$dir/rootfs"
	debootstrap --variant=minbase bookworm "$dir/rootfs" http://deb.debian.org/debian \
		>"$dir/debootstrap.log" 2>&1 || { tail -n 20 "$dir/debootstrap.log" >&2; exit 1; }
	# shellcheck disable=SC2086
	tar -C "$dir/rootfs" -c . | podman $BUILDAH_OPTS import -q - docker.io/library/debian:12 >/dev/null
	rm -rf "$dir/rootfs"
fi
# shellcheck disable=SC2086
buildah $BUILDAH_OPTS bud --network host --pull-never --isolation chroot --layers=false \
	--target release -t "$tag" --build-arg VERSION="$version" --build-arg REVISION="$revision" \
	-f Dockerfile . >"$dir/bud.log" 2>&1 || { tail -n 40 "$dir/bud.log" >&2; exit 1; }
# shellcheck disable=SC2086
buildah $BUILDAH_OPTS push -q "$tag" "oci-archive:$dir/nicpick-image.tar:$tag"
# shellcheck disable=SC2086
buildah $BUILDAH_OPTS rmi --prune >/dev/null 2>&1 || true
echo "nicpick: built $tag from the whole Dockerfile: $dir/nicpick-image.tar (log: $dir/bud.log)"
