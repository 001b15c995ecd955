# Sourced by scripts/static-deps.sh (the release build's libraries) and
# scripts/tls-stacks.sh (bench/tls's other clients): what both do alike.
# The sourcing script sets NAME (its messages' prefix) and DIR (the deps
# tree, whose apt-<release> folders hold the private apt states).

log() { echo "$NAME: $*"; }
# Quiet unless it fails: then the tail of the log says why.
run() {
	logf=$1; shift
	if ! "$@" >"$logf" 2>&1; then
		tail -n 40 "$logf" >&2
		echo "$NAME: failed: $* (log: $logf)" >&2
		exit 1
	fi
}

aptopts() { # release -> apt-get options for its private state
	a=$DIR/apt-$1
	echo "-q -o Dir::Etc::SourceList=$a/sources.list -o Dir::Etc::SourceParts=/nonexistent
 -o Dir::State::Lists=$a/lists -o Dir::Cache=$a/cache -o Dir::State::Status=/var/lib/dpkg/status
 -o Debug::NoLocking=1 -o APT::Sandbox::User=root -o Acquire::Languages=none"
}

# libcurl's configure options whatever its TLS library: only what nicpick
# uses, HTTP(S), HTTP/2 through nghttp2 (--with-nghttp2 is the caller's),
# through a proxy from the environment as every libcurl does.  No other
# protocol, no compression, no IDN/PSL/GSSAPI/LDAP, no CA bundle or path of
# its own (a named CA is the only one; static-deps.sh says what a
# kubeconfig without one gets).
CURL_CONFIG="--disable-shared --enable-static
 --without-zlib --without-brotli --without-zstd --without-libidn2 --without-libpsl
 --without-nghttp3 --without-ngtcp2 --without-libssh2 --without-libssh
 --without-librtmp --without-gssapi --without-ca-bundle --without-ca-path
 --disable-ldap --disable-ldaps --disable-rtsp --disable-dict --disable-telnet --disable-tftp
 --disable-pop3 --disable-imap --disable-smtp --disable-gopher --disable-mqtt --disable-smb
 --disable-ftp --disable-file --disable-manual --disable-docs --disable-ntlm
 --disable-cookies --disable-alt-svc --disable-hsts --disable-doh --disable-netrc
 --disable-unix-sockets --disable-dateparse --disable-mime --disable-form-api
 --disable-websockets --disable-ipfs
 --disable-versioned-symbols --enable-threaded-resolver"
