#!/bin/sh
# Print the environment under which buildah and podman work on a Debian 12
# machine without a registry or a container engine (CONTAINERS.md): storage
# (vfs) under DIR, an engine config that cgroup v1 and these rlimits accept.
# Source its output: `. DIR/env`.
set -eu
dir=$(cd "$1" && pwd)
mkdir -p "$dir/storage" "$dir/run"
printf '[containers]\ndefault_ulimits = []\n[engine]\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n' \
	>"$dir/containers.conf"
store="--storage-driver vfs --root $dir/storage --runroot $dir/run"
echo "export CONTAINERS_CONF=$dir/containers.conf"
echo "BUILDAH_OPTS='$store'"
echo "PODMAN_OPTS='$store --runtime runc --cgroup-manager cgroupfs'"
