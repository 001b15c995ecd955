#!/bin/sh
# Build nicpick's static dependencies with musl, from Debian's own source
# packages: jansson, libyaml, libnl-3 (route, genl) and the mimalloc
# allocator from Debian 12; OpenSSL 3.5, nghttp2 1.64 and libcurl 8.14
# (HTTPS only, HTTP/2 through nghttp2) from Debian 13 (build_openssl says
# why OpenSSL; Debian 12's curl 7.88 lacks the TLS 1.3 and IP-address
# handling the release build relies on).  Everything lives under
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

NAME=static-deps
# log, run (quiet unless it fails), aptopts and curl's common options.
. "$(dirname "$0")/deps-lib.sh"

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
# (bookworm: Debian 12, trixie: Debian 13), each with only deb-src lines
# (aptopts: deps-lib.sh).
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

# --- OpenSSL: the TLS library.  Every pod of a job makes one full TLS
# handshake and one resumed one with the API server, so the library's cost
# per connection is most of what a pod costs to agree.  Measured on the GPU
# machine's idle server CPU, a client of two connections (one resumed):
# OpenSSL 3.5 6.2 ms against an ECDSA P-256 server certificate and 6.2 ms
# against RSA-2048, mbedTLS 3.6 12.3 and 6.0 ms (10.4 ms on ECDSA with
# secp256r1 as its first group): OpenSSL's P-256 and X25519 are assembly
# (ecp_nistz256, x25519-x86_64), mbedTLS's generic bignum code spends 15.7 M
# instructions on each ECDSA verify and 9.1 M on each X25519 operation.
# OpenSSL is Apache-2.0 like mbedTLS, the backend most libcurls use (also
# the system libcurl the dynamic build loads, so both builds say the same
# things about certificates), and it offers the hybrid post-quantum key
# exchange (X25519MLKEM768) that Go 1.24's crypto/tls, the API server's,
# negotiates by default.  The price is size: the binary grows from 1.4 MB
# to 4.7 MB.  wolfSSL 5.7 and GnuTLS 3.8 cost one connection less (bench/tls,
# scripts/tls-stacks.sh builds them: 0.35-0.47 and 0.71-0.91 of OpenSSL's
# CPU), but wolfSSL is GPL-2+ and neither offers X25519MLKEM768.
# Built with musl, static, libcrypto and libssl only, without what a TLS
# 1.2/1.3 client of the API server never uses (old ciphers, DTLS/QUIC,
# engines, modules, CMS/CMP/OCSP/CT, DSA/DH, ...).  No configuration file
# is read (no-autoload-config, and curl's --disable-openssl-auto-load-config):
# a node's openssl.cnf must not change what nicpick accepts.  The last
# line leaves out what TLS never offers a server: BLAKE2 and CMAC, the
# multi-block AES-CBC writes of a TLS 1.2 server, RFC 8422's deprecated
# curves and RFC 9150's integrity-only suites.  The stamp names the option
# set, so a tree built with another one builds OpenSSL again.
OPENSSL_CONFIG="no-shared no-module no-dso no-engine no-afalgeng no-padlockeng no-docs no-tests no-apps
 no-quic no-dtls no-ssl3 no-comp no-legacy no-ui-console no-sctp no-srp no-ktls no-srtp
 no-des no-rc2 no-rc4 no-idea no-seed no-bf no-cast no-camellia no-aria no-sm2 no-sm3 no-sm4
 no-whirlpool no-md4 no-mdc2 no-rmd160 no-siphash no-scrypt no-argon2 no-ocb no-siv
 no-cms no-ts no-cmp no-ct no-ocsp no-http no-rfc3779 no-dsa no-dh no-ec2m no-gost
 no-ml-dsa no-slh-dsa no-nextprotoneg no-ssl-trace no-sslkeylog no-thread-pool no-autoload-config
 no-blake2 no-cmac no-multiblock no-tls-deprecated-ec no-integrity-only-ciphers"
# cmake_static DIR OPTION...: configure Debian's source tree DIR (a CMake
# project: these sources ship no configure script) for a static musl
# library, then build and install it into the prefix; logs beside DIR.
cmake_static() {
	d=$1; shift
	run "$d.configure.log" cmake -S "$d" -B "$d/_build" \
		-DCMAKE_C_COMPILER=musl-gcc -DCMAKE_C_FLAGS="$CFLAGS" -DCMAKE_BUILD_TYPE=MinSizeRel \
		-DCMAKE_INSTALL_PREFIX="$PREFIX" "$@"
	run "$d.build.log" cmake --build "$d/_build" -j "$JOBS" --target install
}

build_openssl() {
	[ -e "$STAMP/openssl3-trim" ] && return 0
	fetch openssl trixie
	log "building openssl"
	o=$SRC/openssl-trixie
	cd "$o"
	# linux/mman.h (secure memory) is among the kernel's headers.
	# shellcheck disable=SC2086
	run "$o.configure.log" env CC=musl-gcc CFLAGS="-O2 -ffunction-sections -fdata-sections -fPIE -I$KINC" \
		./Configure linux-x86_64 --prefix="$PREFIX" --libdir=lib --openssldir=/etc/ssl $OPENSSL_CONFIG
	run "$o.build.log" make -j"$JOBS" build_libs
	run "$o.install.log" make install_dev
	cd - >/dev/null
	rm -f "$STAMP/curl8-openssl-ca-h2"
	touch "$STAMP/openssl3-trim"
}

build_jansson() {
	[ -e "$STAMP/jansson" ] && return 0
	fetch jansson bookworm
	log "building jansson"
	cmake_static "$SRC/jansson-bookworm" -DJANSSON_BUILD_SHARED_LIBS=OFF -DJANSSON_BUILD_DOCS=OFF \
		-DJANSSON_EXAMPLES=OFF -DJANSSON_WITHOUT_TESTS=ON
	touch "$STAMP/jansson"
}

build_yaml() {
	[ -e "$STAMP/yaml" ] && return 0
	fetch libyaml bookworm
	log "building libyaml"
	cmake_static "$SRC/libyaml-bookworm" -DBUILD_SHARED_LIBS=OFF -DBUILD_TESTING=OFF \
		-DINSTALL_CMAKE_DIR=lib/cmake/yaml
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

# --- mimalloc: the allocator of the release binary.  musl's own (mallocng)
# hands every freed page back to the kernel at once: a follower made 163
# mmap and 162 munmap calls, mostly of one page, and took 614 page faults;
# with mimalloc 6 and 424, and 11 % fewer instructions (callgrind, 24.1 M
# against 21.4 M; bench/README.md has the CPU figures).  musl supports
# replacing malloc when linking statically: its own internal allocations
# (atexit, locales, posix_spawn file actions, the time zone) keep calling
# __libc_malloc, so no pointer crosses between the two allocators.
# src/static.c is the whole allocator as one file; MI_MALLOC_OVERRIDE makes
# it define malloc, free and the rest, and aligned_alloc needs __USE_ISOC11,
# a glibc macro musl's headers do not set (src/alloc-override.c).  Like any
# mimalloc it reads MIMALLOC_* variables from the environment (options.c).
#
# A page of blocks of 4 KiB or more grows its free list by one block at a
# time, not four (MI_MIN_EXTEND, src/page.c): writing the next pointer
# into four 16 or 20 KiB blocks (TLS records, curl's buffers) faulted in
# four pages where the process uses one.  28 of a follower's 398 page
# faults (perf stat, one follower of a 2-pod bench/agree); smaller blocks
# still grow by a 4 KiB page's worth.
build_mimalloc() {
	[ -e "$STAMP/mimalloc-extend1" ] && return 0
	fetch mimalloc bookworm
	log "building mimalloc"
	m=$SRC/mimalloc-bookworm
	sed -i 's/^\(#define MI_MIN_EXTEND[[:space:]]*\)(4)$/\1(1)/' "$m/src/page.c"
	grep -q '^#define MI_MIN_EXTEND[[:space:]]*(1)$' "$m/src/page.c" ||
		{ echo "static-deps: mimalloc's src/page.c has no MI_MIN_EXTEND (4) to lower" >&2; exit 1; }
	run "$m.build.log" musl-gcc -O2 -DNDEBUG -DMI_MALLOC_OVERRIDE -D__USE_ISOC11=1 -fPIE \
		-I"$m/include" -c "$m/src/static.c" -o "$m/static.o"
	rm -f "$PREFIX/lib/libmimalloc.a"
	run "$m.ar.log" ar rcs "$PREFIX/lib/libmimalloc.a" "$m/static.o"
	rm -f "$STAMP/mimalloc"
	touch "$STAMP/mimalloc-extend1"
}

# --- nghttp2: HTTP/2 for curl, so that a process's requests and its watch
# share one connection, as client-go's do (lib/k8s/http.c, the twins).
# The library only (no tools, no Python, no examples), static, musl.
build_nghttp2() {
	[ -e "$STAMP/nghttp2" ] && return 0
	fetch nghttp2 trixie
	log "building nghttp2"
	# It installs libnghttp2.pc too, which curl's configure reads.
	cmake_static "$SRC/nghttp2-trixie" -DCMAKE_INSTALL_LIBDIR=lib -DENABLE_LIB_ONLY=ON \
		-DBUILD_SHARED_LIBS=OFF -DBUILD_STATIC_LIBS=ON -DBUILD_TESTING=OFF -DENABLE_DOC=OFF \
		-DENABLE_FAILMALLOC=OFF -DWITH_LIBXML2=OFF -DWITH_JEMALLOC=OFF
	rm -f "$STAMP/curl8-openssl-ca-h2"
	touch "$STAMP/nghttp2"
}

build_curl() {
	[ -e "$STAMP/curl8-openssl-ca-h2" ] && return 0
	fetch curl trixie
	log "building curl"
	c=$SRC/curl-trixie
	cd "$c"
	# A tree an earlier version of this script configured for mbedTLS.
	if [ -f Makefile ]; then run "$c.distclean.log" make distclean; fi
	rm -rf "$PREFIX"/lib/libmbed*.a "$PREFIX/include/mbedtls" "$PREFIX/include/psa"
	# Only what nicpick uses (deps-lib.sh, CURL_CONFIG), with OpenSSL and
	# nghttp2.  No CA bundle of its own: in a pod nicpick
	# names the service account's CA; a kubeconfig without one (the kubectl
	# plugin on a workstation, a publicly trusted server) falls back to
	# OpenSSL's default store, /etc/ssl/certs, as kubectl uses the system's
	# roots then.  curl takes that store only when no CA is named
	# (lib/vtls/openssl.c, CURL_CA_FALLBACK), so a named CA is the only one.
	# shellcheck disable=SC2086
	run "$c.configure.log" ./configure --prefix="$PREFIX" $CURL_CONFIG \
		--with-openssl="$PREFIX" --without-mbedtls --without-gnutls --without-wolfssl \
		--disable-openssl-auto-load-config --with-nghttp2="$PREFIX" --with-ca-fallback
	run "$c.build.log" make -j"$JOBS" -C lib install
	run "$c.headers.log" make -C include install
	run "$c.pc.log" make install-pkgconfigDATA
	cd - >/dev/null
	touch "$STAMP/curl8-openssl-ca-h2"
}

build_openssl
build_jansson
build_yaml
build_libnl
build_nghttp2
build_curl
build_mimalloc
log "ready in $PREFIX"
