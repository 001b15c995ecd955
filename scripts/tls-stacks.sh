#!/bin/sh
# bench/tls's other clients: bench/tls-get.c linked like the release binary
# (musl, curl 8.14, nghttp2, mimalloc from the static deps tree) but against
# wolfSSL 5.7 or GnuTLS 3.8 (with nettle and GMP) instead of OpenSSL, all
# from Debian 13's source packages.  Only for measuring the TLS choice
# (README.md, "Image and binary", says why the release keeps OpenSSL);
# nothing that ships is built here.  Needs `make static` first (its deps
# tree, its apt state and its objects); writes build/static/bench-tls-get-wolfssl
# and build/static/bench-tls-get-gnutls (bench/tls), build/static/nicpick-wolfssl
# and build/static/nicpick-gnutls (the release build's objects with that
# library, for bench/agree), and works under build/static/tls.
# About 10 minutes on 2 cores.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEPS=$ROOT/build/static/deps
W=$ROOT/build/static/tls
OUT=$ROOT/build/static
JOBS=$(nproc 2>/dev/null || echo 2)
[ -e "$DEPS/prefix/lib/libcurl.a" ] && [ -e "$DEPS/stamp/apt-update-trixie" ] && [ -e "$OUT/libnicpick.a" ] ||
	{ echo "tls-stacks: run make static first" >&2; exit 1; }
for t in autoreconf libtoolize; do
	command -v $t >/dev/null || { apt-get update -q && apt-get install -y -q autoconf automake libtool; break; }
done
mkdir -p "$W/src"
NAME=tls-stacks DIR=$DEPS
# log, run, aptopts and curl's common options, as static-deps.sh has them.
. "$ROOT/scripts/deps-lib.sh"
# src PKG: its Debian 13 source, unpacked with Debian's patches, in $W/src/PKG.
# (apt-get source --download-only checks the files' hashes; gnutls28's
# upstream signature file is missing on the mirrors, which makes a plain
# apt-get source fail after the download, so dpkg-source unpacks.)
src() {
	[ -d "$W/src/$1" ] && return 0
	log "apt-get source $1"
	mkdir -p "$W/dl"
	# shellcheck disable=SC2086
	(cd "$W/dl" && apt-get $(aptopts trixie) source --download-only "$1" >"$W/dl/$1.log" 2>&1) || true
	dsc=$(ls "$W/dl/$1"_*.dsc 2>/dev/null | sort -V | tail -n 1)
	[ -n "$dsc" ] || { tail -n 5 "$W/dl/$1.log" >&2; exit 1; }
	rm -rf "$W/src/$1.tmp"
	run "$W/dl/$1.unpack.log" dpkg-source --no-check -x "$dsc" "$W/src/$1.tmp"
	mv "$W/src/$1.tmp" "$W/src/$1"
}
# prefix P: a prefix with the deps tree's nghttp2 (its .pc pointing there).
prefix() {
	mkdir -p "$1/include" "$1/lib/pkgconfig"
	cp -a "$DEPS/prefix/include/nghttp2" "$1/include/"
	cp "$DEPS/prefix/lib/libnghttp2.a" "$1/lib/"
	sed -e "s|^prefix=.*|prefix=$1|" -e 's|^exec_prefix=.*|exec_prefix=${prefix}|' \
	    -e 's|^libdir=.*|libdir=${exec_prefix}/lib|' -e 's|^includedir=.*|includedir=${prefix}/include|' \
	    "$DEPS/prefix/lib/pkgconfig/libnghttp2.pc" >"$1/lib/pkgconfig/libnghttp2.pc"
}
# curl P NAME OPTION... [LIBS]: curl 8.14 (the deps tree's source) into P.
curl_into() {
	p=$1 name=$2 libs=$3; shift 3
	c=$W/curl-$name
	rm -rf "$c" && cp -a "$DEPS/src/curl-trixie" "$c"
	(cd "$c" && make distclean >/dev/null 2>&1 || true)
	log "building curl with $name"
	(cd "$c" && run "$c.configure.log" env CC=musl-gcc \
		CFLAGS="-Os -ffunction-sections -fdata-sections -fPIE -I$DEPS/kernel-include" \
		CPPFLAGS="-I$p/include" LDFLAGS="-L$p/lib" LIBS="$libs" \
		PKG_CONFIG_LIBDIR="$p/lib/pkgconfig" PKG_CONFIG_PATH= \
		./configure --prefix="$p" $CURL_CONFIG --with-nghttp2="$p" "$@")
	(cd "$c" && run "$c.build.log" make -j"$JOBS" -C lib install && run "$c.hdr.log" make -C include install)
}
# nicpick_with P NAME LIB...: the release build's own objects (make static)
# linked against P's libcurl and TLS library, as build/static/nicpick-NAME,
# so that bench/agree measures a whole follower with it.  Measurement only:
# nothing ships it (main.c leaves out its OpenSSL start-up, K8S_TLS_NOT_OPENSSL).
nicpick_with() {
	p=$1 name=$2; shift 2
	o=$W/nicpick-$name
	mkdir -p "$o"
	musl-gcc -O2 -g -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -I"$ROOT/lib" -I"$p/include" \
		-I"$DEPS/prefix/include" -I"$DEPS/prefix/include/libnl3" -I"$DEPS/kernel-include" \
		-DCURL_STATICLIB -DK8S_CURL_STATIC -DK8S_TLS_NOT_OPENSSL -c -o "$o/main.o" "$ROOT/cmd/nicpick/main.c"
	# shellcheck disable=SC2046
	musl-gcc -static -Wl,--gc-sections -o "$OUT/nicpick-$name" "$o/main.o" \
		$(ls "$OUT"/obj/cmd/nicpick/*.o | grep -v '/main\.o$') "$OUT/libnicpick.a" \
		-L"$p/lib" -L"$DEPS/prefix/lib" -Wl,--whole-archive -lmimalloc -Wl,--no-whole-archive \
		-lcurl -lnghttp2 "$@" -lnl-genl-3 -lnl-route-3 -lnl-3 -ljansson -lyaml -ldl -lpthread
	log "built $OUT/nicpick-$name"
}
# client P NAME LIB...: bench/tls-get.c against P.
client() {
	p=$1 name=$2; shift 2
	musl-gcc -O2 -std=gnu11 -Wall -Wextra -Werror -static -I"$p/include" -I"$ROOT/lib" -o "$OUT/bench-tls-get-$name" \
		"$ROOT/bench/tls-get.c" -L"$p/lib" -Wl,--gc-sections \
		-Wl,--whole-archive "$DEPS/prefix/lib/libmimalloc.a" -Wl,--no-whole-archive -lcurl -lnghttp2 "$@"
	log "built $OUT/bench-tls-get-$name"
}
CF="-O2 -ffunction-sections -fdata-sections -fPIE"

# --- wolfSSL (GPL-2+): TLS 1.2/1.3, ALPN, SNI, X25519 and P-256 with its
# single-precision math and x86-64 assembly; Debian's tree has no configure.
P=$W/wolfssl
if [ ! -e "$P/lib/libcurl.a" ]; then
	src wolfssl
	s=$W/src/wolfssl
	log "building wolfssl"
	(cd "$s" && run "$s.autogen.log" ./autogen.sh && run "$s.configure.log" env CC=musl-gcc \
		CFLAGS="$CF -I$DEPS/kernel-include" ./configure --prefix="$P" --enable-static --disable-shared \
		--enable-curl --enable-tls13 --enable-sp=yes --enable-sp-asm --enable-aesni --enable-intelasm \
		--enable-curve25519 --enable-ecc --enable-sni --enable-alpn --enable-session-ticket \
		--disable-oldtls --disable-examples --disable-crypttests --disable-benchmark &&
		run "$s.build.log" make -j"$JOBS" && run "$s.install.log" make install)
	prefix "$P"
	curl_into "$P" wolfssl "" --with-wolfssl="$P" --without-openssl --without-mbedtls --without-gnutls
fi
client "$P" wolfssl -lwolfssl -lm -lpthread
nicpick_with "$P" wolfssl -lwolfssl -lm

# --- GnuTLS (LGPL-2.1+) with nettle and GMP (LGPL-3+ or GPL-2+): GMP for
# generic x86-64 (not this machine's CPU), nettle without IFUNC (musl's
# static binaries have none; its configure test passes anyway).
P=$W/gnutls
if [ ! -e "$P/lib/libcurl.a" ]; then
	src gmp
	src nettle
	src gnutls28
	s=$W/src/gmp
	log "building gmp"
	# A Debian patch edits configure.ac (its doc/ is gone from the dfsg tree).
	(cd "$s" && run "$s.autoreconf.log" autoreconf -fi && run "$s.configure.log" env CC=musl-gcc \
		CFLAGS="$CF" ./configure --prefix="$P" --build=x86_64-pc-linux-gnu --host=x86_64-pc-linux-gnu \
		--disable-shared --enable-static --disable-cxx --disable-fat &&
		run "$s.build.log" make -j"$JOBS" && run "$s.install.log" make install)
	s=$W/src/nettle
	log "building nettle"
	(cd "$s" && run "$s.configure.log" env nettle_cv_link_ifunc=no CC=musl-gcc CFLAGS="$CF" \
		./configure --prefix="$P" --libdir="$P/lib" --disable-shared --enable-static --disable-openssl \
		--disable-documentation --with-include-path="$P/include" --with-lib-path="$P/lib" &&
		run "$s.build.log" make -j"$JOBS" && run "$s.install.log" make install)
	s=$W/src/gnutls28
	log "building gnutls"
	(cd "$s" && run "$s.configure.log" env CC=musl-gcc CFLAGS="$CF -I$DEPS/kernel-include" \
		CPPFLAGS="-I$P/include" LDFLAGS="-L$P/lib" PKG_CONFIG_LIBDIR="$P/lib/pkgconfig" PKG_CONFIG_PATH= \
		./configure --prefix="$P" --libdir="$P/lib" --disable-maintainer-mode --disable-shared \
		--enable-static --with-included-libtasn1 --with-included-unistring --without-p11-kit \
		--without-idn --without-brotli --without-zstd --without-zlib --without-tpm --without-tpm2 \
		--without-leancrypto --without-liboqs --disable-tools --disable-doc --disable-manpages \
		--disable-tests --disable-cxx --disable-nls --disable-libdane --disable-anon-authentication \
		--disable-dsa --disable-gost --disable-dtls-srtp-support --disable-valgrind-tests \
		--disable-full-test-suite --disable-gtk-doc &&
		run "$s.build.log" make -j"$JOBS" && run "$s.install.log" make install)
	prefix "$P"
	# curl's --with-gnutls probe links plain -lgnutls: its libraries in LIBS.
	curl_into "$P" gnutls "-lhogweed -lnettle -lgmp" --with-gnutls="$P" --without-openssl \
		--without-wolfssl --without-mbedtls --with-ca-fallback
fi
client "$P" gnutls -lgnutls -lhogweed -lnettle -lgmp -lm -lpthread
nicpick_with "$P" gnutls -lgnutls -lhogweed -lnettle -lgmp -lm
