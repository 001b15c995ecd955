#!/usr/bin/env bash
# Fetch the Kubernetes API schemas the manifest tests validate against:
# the npm package kubernetes-models (its validators are generated from the
# OpenAPI spec of a current Kubernetes release: Job successPolicy and
# managedBy, container restartPolicyRules), installed with its
# dependencies into build/tools/k8s-models.
#
# Idempotent: does nothing when the pinned version is there and loads.
# Non-interactive (CI=true, no stdin); installs nodejs/npm with apt-get when
# they are missing.
set -euo pipefail

PKG="kubernetes-models"
VER="${NICPICK_K8S_MODELS_VERSION:-5.1.0}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${NICPICK_TOOLS_DIR:-$ROOT/build/tools}/k8s-models"

log() { echo "fetch-k8s-schemas: $*" >&2; }

models_ok() {
    [ -f "$DEST/node_modules/$PKG/package.json" ] &&
        node -e 'const p=require(process.argv[1]); if (p.version !== process.argv[2]) process.exit(1)' \
            "$DEST/node_modules/$PKG/package.json" "$VER" 2>/dev/null &&
        (cd "$DEST" && node --input-type=module -e \
            'await import("kubernetes-models/batch/v1/Job"); await import("kubernetes-models/v1/Pod");') \
            >/dev/null 2>&1
}

if command -v node >/dev/null 2>&1 && models_ok; then
    log "$PKG@$VER already in $DEST"
    exit 0
fi

if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
    log "installing nodejs npm with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=900 update -q </dev/null
    apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends nodejs npm </dev/null
fi

tmp="$DEST.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"
echo '{"name":"nicpick-k8s-models","private":true}' >"$tmp/package.json"
log "npm install $PKG@$VER"
if ! (cd "$tmp" && npm install --loglevel=error --no-fund --no-audit --fetch-retries=2 \
        --fetch-retry-maxtimeout=20000 --fetch-timeout=120000 "$PKG@$VER" </dev/null >&2); then
    log "npm install $PKG@$VER failed (is the npm registry reachable?)"
    exit 1
fi
rm -rf "$DEST"
mv "$tmp" "$DEST"
trap - EXIT
if ! models_ok; then
    log "$PKG@$VER installed in $DEST but does not load"
    exit 1
fi
log "installed $PKG@$VER in $DEST"
