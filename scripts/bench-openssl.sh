#!/bin/sh
# bench-openssl.sh SRC OUT: OpenSSL 3.5 as shared libraries in OUT/lib, for
# the test API server's Python (KUBEAPI_LIBSSL_DIR=OUT/lib, see
# tools/kubeapi/client.py).  Debian 12's Python links OpenSSL 3.0, which
# has no ML-KEM, so the test server settles a TLS 1.3 handshake on X25519;
# kube-apiserver, built with Go >= 1.24, settles it on X25519MLKEM768
# (crypto/tls puts it first in its default curve preferences).  OpenSSL 3.5
# keeps the soname and ABI of 3.0, so the same Python loads it.  SRC is the
# release binary's OpenSSL tree (scripts/static-deps.sh), the same version
# nicpick links; it is copied and built apart from it.  No configuration
# file is read (OPENSSLDIR is OUT/ssl, which does not exist).
set -eu
SRC=${1:?usage: bench-openssl.sh SRC OUT}
OUT=${2:?usage: bench-openssl.sh SRC OUT}
if [ -e "$OUT/lib/libssl.so.3" ] && [ -e "$OUT/lib/libcrypto.so.3" ]; then
	exit 0
fi
[ -e "$SRC/Configure" ] || { echo "bench-openssl: $SRC is not an OpenSSL source tree (make static-deps)" >&2; exit 1; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
rm -rf "$OUT/src" "$OUT/lib.tmp"
echo "bench-openssl: building OpenSSL from $SRC into $OUT/lib (logs in $OUT)"
cp -a "$SRC" "$OUT/src"
cd "$OUT/src"
make distclean >/dev/null 2>&1 || true
./Configure linux-x86_64 --prefix="$OUT/lib.tmp" --libdir=lib --openssldir="$OUT/ssl" \
	shared no-tests no-docs no-apps >"$OUT/configure.log" 2>&1
make -j"$(nproc)" build_libs >"$OUT/build.log" 2>&1
make install_dev >"$OUT/install.log" 2>&1
rm -rf "$OUT/lib"
mv "$OUT/lib.tmp/lib" "$OUT/lib"
rm -rf "$OUT/lib.tmp" "$OUT/src"
echo "bench-openssl: $OUT/lib"
