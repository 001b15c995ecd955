/* bench/tls's client: one HTTPS GET over one connection (HTTP/2 when the
 * server offers it, as nicpick asks), in a process of its own, linked like
 * the release binary (musl, libcurl, nghttp2, mimalloc) with whichever TLS
 * library it was built against.  So its CPU is what one TLS connection
 * costs a pod, apart from the rest of nicpick: against OpenSSL, with the
 * key exchange groups of nicpick's select (lib/k8s/tls_groups.h).
 *
 *   bench-tls-get URL CA-FILE TOKEN     exit 0 when the answer was 200
 *
 * `make static-bench` (also `make test`, `make bench`) builds it against
 * OpenSSL (build/static/bench-tls-get);
 * scripts/tls-stacks.sh against wolfSSL and GnuTLS beside it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "k8s/tls_groups.h"

static size_t sink(char *p, size_t size, size_t n, void *ud)
{
	(void)p;
	*(size_t *)ud += size * n;
	return size * n;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: bench-tls-get URL CA-FILE TOKEN\n");
		return 2;
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return 1;
	CURL *h = curl_easy_init();
	char auth[512];
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", argv[3]);
	struct curl_slist *hd = curl_slist_append(NULL, auth);
	if (!h || !hd)
		return 1;
	size_t got = 0;
	curl_easy_setopt(h, CURLOPT_URL, argv[1]);
	curl_easy_setopt(h, CURLOPT_CAINFO, argv[2]);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
	curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
	/* The key exchange of nicpick's select, where OpenSSL reads it. */
	const char *ssl = curl_version_info(CURLVERSION_NOW)->ssl_version;
	if (ssl && strncmp(ssl, "OpenSSL/", 8) == 0)
		curl_easy_setopt(h, CURLOPT_SSL_EC_CURVES, K8S_TLS_GROUPS_POD);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &got);
	CURLcode rc = curl_easy_perform(h);
	long code = 0, version = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_getinfo(h, CURLINFO_HTTP_VERSION, &version);
	if (rc != CURLE_OK)
		fprintf(stderr, "bench-tls-get: %s\n", curl_easy_strerror(rc));
	else
		fprintf(stderr, "bench-tls-get: %ld over %s, %zu bytes\n", code,
			version == CURL_HTTP_VERSION_2_0 ? "HTTP/2" : "HTTP/1.1", got);
	curl_slist_free_all(hd);
	curl_easy_cleanup(h);
	curl_global_cleanup();
	return rc == CURLE_OK && code == 200 ? 0 : 1;
}
