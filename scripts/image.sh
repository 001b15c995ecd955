#!/bin/sh
# `make image`: build the release image from build/static (Dockerfile.release,
# FROM scratch) with buildah, and write it as an OCI archive whose
# uncompressed layer size is the image's real size.  Container storage lives
# under build/image, as CONTAINERS.md describes for these machines: vfs,
# cgroupfs, no default ulimits; podman runs it with runc.
#
#   scripts/image.sh TAG VERSION REVISION [ARCHIVE]
set -eu
tag=$1 version=$2 revision=$3
dir=build/image
archive=${4:-$dir/nicpick-image.tar}
mkdir -p "$dir"
[ -x build/static/nicpick ] || { echo "nicpick: build/static/nicpick missing: run make static" >&2; exit 1; }
for t in buildah podman runc; do
	command -v "$t" >/dev/null || { echo "nicpick: $t is not installed (scripts/install-deps.sh)" >&2; exit 1; }
done
"$(dirname "$0")/containers-env.sh" "$dir" >"$dir/env"
. "$dir/env"
rm -f "$archive"
# shellcheck disable=SC2086
buildah $BUILDAH_OPTS bud -q --layers=false -t "$tag" -f Dockerfile.release \
	--build-arg VERSION="$version" --build-arg REVISION="$revision" . >/dev/null
# shellcheck disable=SC2086
buildah $BUILDAH_OPTS push -q "$tag" "oci-archive:$archive:$tag"
# shellcheck disable=SC2086
buildah $BUILDAH_OPTS rmi --prune >/dev/null 2>&1 || true  # the images this tag replaced
/usr/bin/python3 - "$archive" "$tag" <<'PY'
import gzip, json, sys, tarfile
path, tag = sys.argv[1], sys.argv[2]
with tarfile.open(path) as t:
    blob = lambda d: t.extractfile("blobs/" + d.replace(":", "/")).read()
    index = json.loads(t.extractfile("index.json").read())
    manifest = json.loads(blob(index["manifests"][0]["digest"]))
    size = 0
    for layer in manifest["layers"]:
        data = blob(layer["digest"])
        size += len(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
print(f"image {tag}: {size} bytes uncompressed in {len(manifest['layers'])} layer(s), "
      f"{path}")
PY
