#!/bin/sh
# Build nicpick's static dependencies with musl, from Debian's own source
# packages: jansson, libyaml and libnl-3 (route, genl) from Debian 12;
# mbedTLS 3.6 and libcurl 8.14 (HTTPS only) from Debian 13 (Debian 12's
# mbedTLS 2.28 cannot match an iPAddress subjectAltName, and in-cluster the
# API server is an IP address; Debian 12's curl 7.88 speaks only TLS 1.2 with
# mbedTLS, and an API server may require TLS 1.3).  Everything lives under
# DIR (default build/static/deps): private
# apt states with deb-src lines (the system's apt configuration is not
# touched), the unpacked sources, and the install prefix.  A stamp file per
# step makes a second run a no-op.
set -eu
DIR=${1:-build/static/deps}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
PREFIX=$DIR/prefix
SRC=$DIR/src
STAMP=$DIR/stamp
JOBS=$(nproc 2>/dev/null || echo 2)
mkdir -p "$PREFIX/include" "$PREFIX/lib" "$SRC" "$STAMP"

log() { echo "static-deps: $*"; }
# Quiet unless it fails: then the tail of the log says why.
run() {
	logf=$1; shift
	if ! "$@" >"$logf" 2>&1; then
		tail -n 40 "$logf" >&2
		echo "static-deps: failed: $* (log: $logf)" >&2
		exit 1
	fi
}

# musl-gcc sees only musl's headers; libnl needs the kernel's uapi headers
# (linux-libc-dev), which are libc-independent.
KINC=$DIR/kernel-include
if [ ! -e "$STAMP/kinc" ]; then
	mkdir -p "$KINC"
	for d in linux asm-generic; do ln -sfn "/usr/include/$d" "$KINC/$d"; done
	ln -sfn "/usr/include/$(gcc -dumpmachine)/asm" "$KINC/asm"
	touch "$STAMP/kinc"
fi

export CC=musl-gcc
export CFLAGS="-Os -ffunction-sections -fdata-sections -fPIE -I$KINC"
export CPPFLAGS="-I$PREFIX/include -I$KINC"
export LDFLAGS="-L$PREFIX/lib"
export PKG_CONFIG_LIBDIR=$PREFIX/lib/pkgconfig
export PKG_CONFIG_PATH=

# --- sources: apt-get source through a private apt state per Debian release
# (bookworm: Debian 12, trixie: Debian 13), each with only deb-src lines.
aptopts() { # release -> apt-get options for its private state
	a=$DIR/apt-$1
	echo "-q -o Dir::Etc::SourceList=$a/sources.list -o Dir::Etc::SourceParts=/nonexistent
 -o Dir::State::Lists=$a/lists -o Dir::Cache=$a/cache -o Dir::State::Status=/var/lib/dpkg/status
 -o Debug::NoLocking=1 -o APT::Sandbox::User=root -o Acquire::Languages=none"
}
apt_update() { # release
	rel=$1
	[ -e "$STAMP/apt-update-$rel" ] && return 0
	a=$DIR/apt-$rel
	log "apt-get update ($rel deb-src, private state in $a)"
	mkdir -p "$a/lists/partial" "$a/cache/archives/partial"
	key=/usr/share/keyrings/debian-archive-keyring.gpg
	cat >"$a/sources.list" <<EOS
deb-src [signed-by=$key] http://deb.debian.org/debian $rel main
deb-src [signed-by=$key] http://deb.debian.org/debian $rel-updates main
deb-src [signed-by=$key] http://deb.debian.org/debian-security $rel-security main
EOS
	# shellcheck disable=SC2046
	run "$a/update.log" apt-get $(aptopts "$rel") update
	touch "$STAMP/apt-update-$rel"
}
fetch() { # source package, release -> $SRC/<pkg>-<release> (unpacked, Debian patches applied)
	pkg=$1 rel=$2
	d=$SRC/$pkg-$rel
	[ -e "$STAMP/src-$pkg-$rel" ] && return 0
	apt_update "$rel"
	log "apt-get source $pkg ($rel)"
	rm -rf "$d.tmp" && mkdir -p "$d.tmp"
	# The newest version first; a mirror that lacks its files (a security
	# update not mirrored yet) falls back to the next one listed.
	# shellcheck disable=SC2046
	vers=$(apt-cache $(aptopts "$rel") showsrc "$pkg" | sed -n 's/^Version: //p' | sort -urV)
	ok=
	for v in $vers; do
		# shellcheck disable=SC2046
		if (cd "$d.tmp" && apt-get $(aptopts "$rel") source "$pkg=$v" >"$d.fetch.log" 2>&1); then
			ok=1
			break
		fi
		rm -rf "$d.tmp" && mkdir -p "$d.tmp"
	done
	[ -n "$ok" ] || { tail -n 20 "$d.fetch.log" >&2; echo "static-deps: cannot fetch $pkg ($rel)" >&2; exit 1; }
	u=$(find "$d.tmp" -mindepth 1 -maxdepth 1 -type d | head -n 1)
	rm -rf "$d" && mv "$u" "$d" && rm -rf "$d.tmp"
	touch "$STAMP/src-$pkg-$rel"
}

# --- mbedTLS: the TLS library (a few hundred KB linked, against OpenSSL's MBs).
# 3.6 (Debian 13) because hostname verification matches iPAddress SANs since
# 3.5, and with TLS 1.3 (MBEDTLS_SSL_PROTO_TLS1_3, on in its default config),
# which curl drives from 8.8 with mbedTLS 3.6 (it calls psa_crypto_init()).
build_mbedtls() {
	[ -e "$STAMP/mbedtls3-p256" ] && return 0
	fetch mbedtls trixie
	log "building mbedtls"
	m=$SRC/mbedtls-trixie
	# mbedTLS calls getrandom(2) only under glibc and otherwise opens
	# /dev/urandom, which an image's root need not have: the syscall on
	# any Linux libc.
	f=$m/library/entropy_poll.c
	sed -i 's/defined(__linux__) \&\& defined(__GLIBC__)/defined(__linux__)/' "$f"
	grep -q '^#if ((defined(__linux__)) ||' "$f" || { echo "static-deps: cannot patch $f" >&2; exit 1; }
	# (A tree that an earlier version of this script built has it
	# commented out.)
	f=$m/include/mbedtls/mbedtls_config.h
	sed -i 's|^/\* #define MBEDTLS_SSL_PROTO_TLS1_3 \*/$|#define MBEDTLS_SSL_PROTO_TLS1_3|' "$f"
	grep -q '^#define MBEDTLS_SSL_PROTO_TLS1_3$' "$f" || { echo "static-deps: $f has no TLS 1.3" >&2; exit 1; }
	# The key exchange: secp256r1 first, X25519 second (mbedTLS lists
	# X25519 first).  A TLS 1.3 client sends a key share for the first group
	# only, and in this build P-256 costs far less: its key generation uses
	# the precomputed comb table of the fixed generator
	# (MBEDTLS_ECP_FIXED_POINT_OPTIM) and the NIST reduction, where X25519
	# runs the generic Montgomery ladder for the key and again for the
	# secret.  callgrind, a client making two connections to the API server
	# (one full handshake, one resumed): 44.2 M instructions -> 30.1 M with
	# an RSA-2048 server certificate, 72.6 M -> 53.3 M with ECDSA P-256.
	# Every TLS 1.3 server implements secp256r1 (RFC 8446, 9.1: MUST); Go's
	# crypto/tls (the API server's) takes the first of its preferences for
	# which the client sent a share, so no HelloRetryRequest; a server that
	# wants X25519 still gets it, one round trip later.  curl 8.14 has no
	# option for mbedTLS's groups, and its CURLOPT_SSL_CTX_FUNCTION comes
	# after mbedtls_ssl_setup() has taken the list: so the default changes.
	f=$m/library/ssl_tls.c
	perl -0pi -e 's/(ssl_preset_default_groups\[\] = \{\n)(#if defined\(MBEDTLS_ECP_HAVE_CURVE25519\)\n    MBEDTLS_SSL_IANA_TLS_GROUP_X25519,\n#endif\n)(#if defined\(MBEDTLS_ECP_HAVE_SECP256R1\)\n    MBEDTLS_SSL_IANA_TLS_GROUP_SECP256R1,\n#endif\n)/$1$3$2/' "$f"
	perl -0ne 'exit(/ssl_preset_default_groups\[\] = \{\n#if defined\(MBEDTLS_ECP_HAVE_SECP256R1\)\n/ ? 0 : 1)' "$f" ||
		{ echo "static-deps: cannot put secp256r1 first in $f" >&2; exit 1; }
	# mbedTLS's Makefile does not track the config header: from clean.
	run "$m.clean.log" make -C "$m/library" clean
	run "$m.build.log" make -C "$m/library" -j"$JOBS" CC=musl-gcc CFLAGS="$CFLAGS" static
	rm -rf "$PREFIX/include/mbedtls" "$PREFIX/include/psa" "$PREFIX"/lib/libmbed*.a
	cp -r "$m/include/mbedtls" "$m/include/psa" "$PREFIX/include/"
	cp "$m"/library/libmbed*.a "$PREFIX/lib/"
	rm -f "$STAMP/curl8"
	touch "$STAMP/mbedtls3-p256"
}

build_jansson() {
	[ -e "$STAMP/jansson" ] && return 0
	fetch jansson bookworm
	log "building jansson"
	# Debian's jansson tarball has no configure script: its CMake build.
	run "$SRC/jansson-bookworm.configure.log" cmake -S "$SRC/jansson-bookworm" -B "$SRC/jansson-bookworm/_build" \
		-DCMAKE_C_COMPILER=musl-gcc -DCMAKE_C_FLAGS="$CFLAGS" -DCMAKE_BUILD_TYPE=MinSizeRel \
		-DCMAKE_INSTALL_PREFIX="$PREFIX" -DJANSSON_BUILD_SHARED_LIBS=OFF -DJANSSON_BUILD_DOCS=OFF \
		-DJANSSON_EXAMPLES=OFF -DJANSSON_WITHOUT_TESTS=ON
	run "$SRC/jansson-bookworm.build.log" cmake --build "$SRC/jansson-bookworm/_build" -j "$JOBS" --target install
	touch "$STAMP/jansson"
}

build_yaml() {
	[ -e "$STAMP/yaml" ] && return 0
	fetch libyaml bookworm
	log "building libyaml"
	# As for jansson: Debian's libyaml source has no configure script, its
	# CMake build makes the static library.
	y=$SRC/libyaml-bookworm
	run "$y.configure.log" cmake -S "$y" -B "$y/_build" \
		-DCMAKE_C_COMPILER=musl-gcc -DCMAKE_C_FLAGS="$CFLAGS" -DCMAKE_BUILD_TYPE=MinSizeRel \
		-DCMAKE_INSTALL_PREFIX="$PREFIX" -DBUILD_SHARED_LIBS=OFF -DBUILD_TESTING=OFF \
		-DINSTALL_CMAKE_DIR=lib/cmake/yaml
	run "$y.build.log" cmake --build "$y/_build" -j "$JOBS" --target install
	touch "$STAMP/yaml"
}

build_libnl() {
	[ -e "$STAMP/libnl" ] && return 0
	fetch libnl3 bookworm
	log "building libnl3"
	cd "$SRC/libnl3-bookworm"
	# Debian's patches touch Makefile.am only for the shared library and
	# the installed config files: keep the generated files, no automake.
	now=$(date '+%Y-%m-%d %H:%M:%S')
	find . \( -name Makefile.in -o -name '*.h.in' \) -exec touch -d "$now" {} + && touch -d "$now" aclocal.m4 configure
	run "$SRC/libnl3-bookworm.configure.log" ./configure --prefix="$PREFIX" --disable-shared --enable-static \
		--sysconfdir=/etc --disable-cli --disable-debug --disable-pthreads
	run "$SRC/libnl3-bookworm.build.log" make -j"$JOBS" lib/libnl-3.la lib/libnl-route-3.la lib/libnl-genl-3.la
	mkdir -p "$PREFIX/include/libnl3"
	cp -r include/netlink "$PREFIX/include/libnl3/"
	cp lib/.libs/libnl-3.a lib/.libs/libnl-route-3.a lib/.libs/libnl-genl-3.a "$PREFIX/lib/"
	cd - >/dev/null
	touch "$STAMP/libnl"
}

build_curl() {
	[ -e "$STAMP/curl8" ] && return 0
	fetch curl trixie
	log "building curl"
	c=$SRC/curl-trixie
	cd "$c"
	# Only what nicpick uses: HTTP(S) with mbedTLS, through a proxy from the
	# environment as every libcurl does.  No other protocol, no compression,
	# no IDN/PSL/GSSAPI/LDAP, no default CA bundle (nicpick always names one).
	run "$c.configure.log" ./configure --prefix="$PREFIX" --disable-shared --enable-static \
		--with-mbedtls="$PREFIX" --without-openssl --without-gnutls --without-wolfssl \
		--without-zlib --without-brotli --without-zstd --without-libidn2 --without-libpsl \
		--without-nghttp2 --without-nghttp3 --without-ngtcp2 --without-libssh2 --without-libssh \
		--without-librtmp --without-gssapi --without-ca-bundle --without-ca-path --without-ca-fallback \
		--disable-ldap --disable-ldaps --disable-rtsp --disable-dict --disable-telnet --disable-tftp \
		--disable-pop3 --disable-imap --disable-smtp --disable-gopher --disable-mqtt --disable-smb \
		--disable-ftp --disable-file --disable-manual --disable-docs --disable-ntlm \
		--disable-cookies --disable-alt-svc --disable-hsts --disable-doh --disable-netrc \
		--disable-unix-sockets --disable-dateparse --disable-mime --disable-form-api \
		--disable-websockets --disable-ipfs \
		--disable-versioned-symbols --enable-threaded-resolver
	run "$c.build.log" make -j"$JOBS" -C lib install
	run "$c.headers.log" make -C include install
	run "$c.pc.log" make install-pkgconfigDATA
	cd - >/dev/null
	touch "$STAMP/curl8"
}

build_mbedtls
build_jansson
build_yaml
build_libnl
build_curl
log "ready in $PREFIX"
