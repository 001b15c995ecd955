/* libcurl is loaded with dlopen when the first Kubernetes client is made.
 * Linked directly, libcurl and its dependency chain (TLS, IDN, GSSAPI,
 * LDAP, ...) cost about 5 ms of dynamic linking at every start, more than
 * all of `nicpick discover` on a normal node, which never talks HTTP.
 * The table is typed from the real prototypes, so a mismatch is a compile
 * error; a missing library is a clear error, not a crash.
 * The static build (`make static`, -DK8S_CURL_STATIC) has libcurl linked
 * in and no dynamic linker: the table points at it directly. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "k8s/k8s_priv.h"

#ifdef K8S_CURL_STATIC
struct k8s_curl_api k8s_curl = {
	.loaded = true,
	.global_init = curl_global_init,
	.global_cleanup = curl_global_cleanup,
	.easy_init = curl_easy_init,
	.easy_cleanup = curl_easy_cleanup,
	.easy_reset = curl_easy_reset,
	.easy_perform = curl_easy_perform,
	.easy_setopt = curl_easy_setopt,
	.easy_getinfo = curl_easy_getinfo,
	.easy_strerror = curl_easy_strerror,
	.easy_escape = curl_easy_escape,
	.free = curl_free,
	.slist_append = curl_slist_append,
	.slist_free_all = curl_slist_free_all,
	.url = curl_url,
	.url_cleanup = curl_url_cleanup,
	.url_get = curl_url_get,
	.url_set = curl_url_set,
	.share_init = curl_share_init,
	.share_cleanup = curl_share_cleanup,
	.share_setopt = curl_share_setopt,
	.easy_pause = curl_easy_pause,
	.version_info = curl_version_info,
	.multi_init = curl_multi_init,
	.multi_cleanup = curl_multi_cleanup,
	.multi_setopt = curl_multi_setopt,
	.multi_add_handle = curl_multi_add_handle,
	.multi_remove_handle = curl_multi_remove_handle,
	.multi_perform = curl_multi_perform,
	.multi_poll = curl_multi_poll,
	.multi_info_read = curl_multi_info_read,
	.multi_strerror = curl_multi_strerror,
};

int k8s_curl_load(np_error *err)
{
	(void)err;
	return 0;
}
#else
#include <dlfcn.h>

struct k8s_curl_api k8s_curl;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_error[512];

static void load(void)
{
	void *h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(load_error, sizeof(load_error), "%s", dlerror());
		return;
	}
#define SYM(field, name)                                                                   \
	do {                                                                                \
		*(void **)&k8s_curl.field = dlsym(h, name);                                 \
		if (!k8s_curl.field) {                                                      \
			snprintf(load_error, sizeof(load_error), "libcurl.so.4 has no %s", name); \
			return;                                                             \
		}                                                                           \
	} while (0)
	SYM(global_init, "curl_global_init");
	SYM(global_cleanup, "curl_global_cleanup");
	SYM(easy_init, "curl_easy_init");
	SYM(easy_cleanup, "curl_easy_cleanup");
	SYM(easy_reset, "curl_easy_reset");
	SYM(easy_perform, "curl_easy_perform");
	SYM(easy_setopt, "curl_easy_setopt");
	SYM(easy_getinfo, "curl_easy_getinfo");
	SYM(easy_strerror, "curl_easy_strerror");
	SYM(easy_escape, "curl_easy_escape");
	SYM(free, "curl_free");
	SYM(slist_append, "curl_slist_append");
	SYM(slist_free_all, "curl_slist_free_all");
	SYM(url, "curl_url");
	SYM(url_cleanup, "curl_url_cleanup");
	SYM(url_get, "curl_url_get");
	SYM(url_set, "curl_url_set");
	SYM(share_init, "curl_share_init");
	SYM(share_cleanup, "curl_share_cleanup");
	SYM(share_setopt, "curl_share_setopt");
	SYM(easy_pause, "curl_easy_pause");
	SYM(version_info, "curl_version_info");
	SYM(multi_init, "curl_multi_init");
	SYM(multi_cleanup, "curl_multi_cleanup");
	SYM(multi_setopt, "curl_multi_setopt");
	SYM(multi_add_handle, "curl_multi_add_handle");
	SYM(multi_remove_handle, "curl_multi_remove_handle");
	SYM(multi_perform, "curl_multi_perform");
	SYM(multi_poll, "curl_multi_poll"); /* 7.66.0 */
	SYM(multi_info_read, "curl_multi_info_read");
	SYM(multi_strerror, "curl_multi_strerror");
#undef SYM
	k8s_curl.loaded = true;
}

int k8s_curl_load(np_error *err)
{
	pthread_once(&once, load);
	if (k8s_curl.loaded)
		return 0;
	return np_error_set(err, NP_EINTERNAL, 0,
			    "cannot load libcurl (%s): install libcurl4 to use --peers k8s", load_error);
}
#endif

bool k8s_curl_has_http2(void)
{
	const curl_version_info_data *v = k8s_curl.version_info(CURLVERSION_NOW);
	return v && (v->features & CURL_VERSION_HTTP2);
}

bool k8s_curl_is_openssl(void)
{
	const curl_version_info_data *v = k8s_curl.version_info(CURLVERSION_NOW);
	return v && v->ssl_version && strncmp(v->ssl_version, "OpenSSL/", 8) == 0;
}

bool k8s_curl_h2_pause_ok(void)
{
	const curl_version_info_data *v = k8s_curl.version_info(CURLVERSION_NOW);
	return v && v->version_num >= 0x080e00; /* 8.14.0 */
}
