#!/bin/sh
# Build nicpick's static dependencies with musl, from Debian 12's own source
# packages: mbedTLS, libcurl (HTTPS only), jansson and libnl-3 (route, genl).
# Everything lives under DIR (default build/static/deps): a private apt state
# with deb-src lines (the system's apt configuration is not touched), the
# unpacked sources, and the install prefix.  A stamp file per step makes a
# second run a no-op.
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

# --- sources: apt-get source through a private apt state with deb-src lines
APT=$DIR/apt
aptopts="-q -o Dir::Etc::SourceList=$APT/sources.list -o Dir::Etc::SourceParts=/nonexistent
 -o Dir::State::Lists=$APT/lists -o Dir::Cache=$APT/cache -o Dir::State::Status=/var/lib/dpkg/status
 -o Debug::NoLocking=1 -o APT::Sandbox::User=root -o Acquire::Languages=none"
if [ ! -e "$STAMP/apt-update" ]; then
	log "apt-get update (deb-src, private state in $APT)"
	mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial"
	key=/usr/share/keyrings/debian-archive-keyring.gpg
	cat >"$APT/sources.list" <<EOS
deb-src [signed-by=$key] http://deb.debian.org/debian bookworm main
deb-src [signed-by=$key] http://deb.debian.org/debian bookworm-updates main
deb-src [signed-by=$key] http://deb.debian.org/debian-security bookworm-security main
EOS
	# shellcheck disable=SC2086
	run "$APT/update.log" apt-get $aptopts update
	touch "$STAMP/apt-update"
fi
fetch() { # source package -> $SRC/<pkg> (unpacked, Debian patches applied)
	pkg=$1
	[ -e "$STAMP/src-$pkg" ] && return 0
	log "apt-get source $pkg"
	rm -rf "$SRC/$pkg.tmp" && mkdir -p "$SRC/$pkg.tmp"
	# shellcheck disable=SC2086
	(cd "$SRC/$pkg.tmp" && run "$SRC/$pkg.fetch.log" apt-get $aptopts source "$pkg")
	d=$(find "$SRC/$pkg.tmp" -mindepth 1 -maxdepth 1 -type d | head -n 1)
	rm -rf "$SRC/$pkg" && mv "$d" "$SRC/$pkg" && rm -rf "$SRC/$pkg.tmp"
	touch "$STAMP/src-$pkg"
}

# --- mbedTLS: the TLS library (a few hundred KB linked, against OpenSSL's MBs)
build_mbedtls() {
	[ -e "$STAMP/mbedtls" ] && return 0
	fetch mbedtls
	log "building mbedtls"
	# mbedTLS calls getrandom(2) only under glibc and otherwise opens
	# /dev/urandom, which an image's root need not have: the syscall on
	# any Linux libc.
	f=$SRC/mbedtls/library/entropy_poll.c
	sed -i 's/defined(__linux__) \&\& defined(__GLIBC__)/defined(__linux__)/' "$f"
	grep -q '^#if ((defined(__linux__)) ||' "$f" || { echo "static-deps: cannot patch $f" >&2; exit 1; }
	run "$SRC/mbedtls.build.log" make -C "$SRC/mbedtls/library" -j"$JOBS" CC=musl-gcc \
		CFLAGS="$CFLAGS" static
	cp -r "$SRC/mbedtls/include/mbedtls" "$SRC/mbedtls/include/psa" "$PREFIX/include/"
	cp "$SRC"/mbedtls/library/libmbed*.a "$PREFIX/lib/"
	touch "$STAMP/mbedtls"
}

build_jansson() {
	[ -e "$STAMP/jansson" ] && return 0
	fetch jansson
	log "building jansson"
	# Debian's jansson tarball has no configure script: its CMake build.
	run "$SRC/jansson.configure.log" cmake -S "$SRC/jansson" -B "$SRC/jansson/_build" \
		-DCMAKE_C_COMPILER=musl-gcc -DCMAKE_C_FLAGS="$CFLAGS" -DCMAKE_BUILD_TYPE=MinSizeRel \
		-DCMAKE_INSTALL_PREFIX="$PREFIX" -DJANSSON_BUILD_SHARED_LIBS=OFF -DJANSSON_BUILD_DOCS=OFF \
		-DJANSSON_EXAMPLES=OFF -DJANSSON_WITHOUT_TESTS=ON
	run "$SRC/jansson.build.log" cmake --build "$SRC/jansson/_build" -j "$JOBS" --target install
	touch "$STAMP/jansson"
}

build_libnl() {
	[ -e "$STAMP/libnl" ] && return 0
	fetch libnl3
	log "building libnl3"
	cd "$SRC/libnl3"
	# Debian's patches touch Makefile.am only for the shared library and
	# the installed config files: keep the generated files, no automake.
	now=$(date '+%Y-%m-%d %H:%M:%S')
	find . \( -name Makefile.in -o -name '*.h.in' \) -exec touch -d "$now" {} + && touch -d "$now" aclocal.m4 configure
	run "$SRC/libnl3.configure.log" ./configure --prefix="$PREFIX" --disable-shared --enable-static \
		--sysconfdir=/etc --disable-cli --disable-debug --disable-pthreads
	run "$SRC/libnl3.build.log" make -j"$JOBS" lib/libnl-3.la lib/libnl-route-3.la lib/libnl-genl-3.la
	mkdir -p "$PREFIX/include/libnl3"
	cp -r include/netlink "$PREFIX/include/libnl3/"
	cp lib/.libs/libnl-3.a lib/.libs/libnl-route-3.a lib/.libs/libnl-genl-3.a "$PREFIX/lib/"
	cd - >/dev/null
	touch "$STAMP/libnl"
}

build_curl() {
	[ -e "$STAMP/curl" ] && return 0
	fetch curl
	log "building curl"
	cd "$SRC/curl"
	# Only what nicpick uses: HTTP(S) with mbedTLS, through a proxy from the
	# environment as every libcurl does.  No other protocol, no compression,
	# no IDN/PSL/GSSAPI/LDAP, no default CA bundle (nicpick always names one).
	run "$SRC/curl.configure.log" ./configure --prefix="$PREFIX" --disable-shared --enable-static \
		--with-mbedtls="$PREFIX" --without-openssl --without-gnutls --without-wolfssl \
		--without-zlib --without-brotli --without-zstd --without-libidn2 --without-libpsl \
		--without-nghttp2 --without-nghttp3 --without-ngtcp2 --without-libssh2 --without-libssh \
		--without-librtmp --without-gssapi --without-ca-bundle --without-ca-path --without-ca-fallback \
		--disable-ldap --disable-ldaps --disable-rtsp --disable-dict --disable-telnet --disable-tftp \
		--disable-pop3 --disable-imap --disable-smtp --disable-gopher --disable-mqtt --disable-smb \
		--disable-ftp --disable-file --disable-manual --disable-ntlm --disable-ntlm-wb \
		--disable-cookies --disable-alt-svc --disable-hsts --disable-doh --disable-netrc \
		--disable-unix-sockets --disable-dateparse --disable-mime --disable-form-api \
		--disable-versioned-symbols --enable-threaded-resolver
	run "$SRC/curl.build.log" make -j"$JOBS" -C lib install
	run "$SRC/curl.headers.log" make -C include install
	run "$SRC/curl.pc.log" make install-pkgconfigDATA
	cd - >/dev/null
	touch "$STAMP/curl"
}

build_mbedtls
build_jansson
build_libnl
build_curl
log "ready in $PREFIX"
