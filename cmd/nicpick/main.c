/* nicpick: dispatch to the verb named first; each verb's file parses its
 * own options (cli.c holds what they share) and maps errors to exit codes.
 * The work is done in lib/.
 *
 * Invoked as kubectl-nicpick (the link `nicpick install` and the image
 * add), it is kubectl's plugin: `kubectl nicpick status JOB` runs it with
 * "status JOB", the same verbs as nicpick's. */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "util/clock.h"
#include "util/jsonmem.h"

/* The release build links OpenSSL; scripts/tls-stacks.sh links the same
 * objects against other TLS libraries, to measure them (K8S_TLS_NOT_OPENSSL). */
#if defined(K8S_CURL_STATIC) && !defined(K8S_TLS_NOT_OPENSSL)
#define NICPICK_OPENSSL_LINKED 1
#include <stdint.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#endif

const struct cli_verb *const cli_verbs[] = { &cli_discover, &cli_select, &cli_smoke,
					     &cli_install, &cli_status, &cli_version, NULL };

/* What a verb printed must have reached its reader: `nicpick version
 * >/dev/full` fails (exit 1, with the reason), as coreutils' close_stdout
 * does. */
static int flushed(int rc)
{
	if (fflush(stdout) == 0 && !ferror(stdout))
		return rc;
	np_error err = { 0 };
	np_error_set(&err, NP_EINTERNAL, errno ? errno : EIO, "cannot write to standard output");
	int frc = cli_fail(&err);
	return rc ? rc : frc;
}

#ifdef NICPICK_OPENSSL_LINKED
static void openssl_start(const char *verb)
{
	/* The release binary has OpenSSL linked in.  At exit its clean-up
	 * frees every table it built, half a million instructions (2.4 % of a
	 * follower's), for memory the kernel takes back anyway.  The first
	 * initialisation decides (crypto/init.c, register_atexit).
	 *
	 * Nor does it fill the table of legacy cipher names that
	 * OPENSSL_init_ssl asks for (ssl/ssl_init.c adds
	 * OPENSSL_INIT_ADD_ALL_CIPHERS; crypto/init.c runs that once, and
	 * the NO_ flag runs the once as a no-op first): 0.6 M instructions of
	 * a follower's 16-17 M, in the table and in the name map that copies
	 * it (get_legacy_evp_names).  TLS fetches its ciphers from the
	 * provider by name (ssl_evp_cipher_fetch); only EVP_get_cipherbyname
	 * reads the table, for encrypted PEM and PKCS#8 keys, which a
	 * kubeconfig cannot carry (client-go reads neither).  The digest
	 * table holds only the digests a Kubernetes client verifies
	 * certificates with: certificate signatures look their digest up in it
	 * (crypto/asn1/a_verify.c, crypto/x509/x509_set.c, EVP_get_digestbynid),
	 * and Go's crypto/x509, kubectl's and the API server's, signs and
	 * verifies with SHA-256, SHA-384 and SHA-512 only (SHA-1 no more since
	 * Go 1.24).  The name map copies the table too (get_legacy_md_names,
	 * 0.43 M instructions for all 42 of its names).
	 *
	 * Nor, but for `status`, does it load the texts of libcrypto's errors:
	 * the first use of the error queue would (crypto/err/err.c,
	 * ossl_err_get_state_int), 0.47 M instructions (2.6 %) and 8 page
	 * faults of a follower's, and the choice is made once.  Only `status` reads a
	 * kubeconfig, whose client certificate and key are where those texts
	 * say what is wrong (curl's cert_stuff).  Every other verb's TLS errors
	 * keep their words: SSL_CTX_new loads libssl's texts, which hold the
	 * handshake's reasons that lib/k8s/http.c tells refusals by ("wrong
	 * version number", "... alert ..."), and curl words a failed
	 * verification with X509_verify_cert_error_string, a table of its own.
	 * What is left shows as OpenSSL's code ("error:0A000410:lib(20)::..."),
	 * which `openssl errstr` reads. */
	uint64_t opts = OPENSSL_INIT_NO_ATEXIT | OPENSSL_INIT_NO_ADD_ALL_CIPHERS |
			OPENSSL_INIT_NO_ADD_ALL_DIGESTS;
	if (strcmp(verb, cli_status.name) != 0)
		opts |= OPENSSL_INIT_NO_LOAD_CRYPTO_STRINGS;
	OPENSSL_init_crypto(opts, NULL);
	EVP_add_digest(EVP_sha256());
	EVP_add_digest(EVP_sha384());
	EVP_add_digest(EVP_sha512());
}
#endif

int main(int argc, char **argv)
{
	/* jansson's allocations through a per-thread counter, so that lib/k8s
	 * can hold the parse of what the API server sent to a budget
	 * (util/jsonmem.h): process-wide, so here, before any thread. */
	np_json_budget_install();
	/* nicpick builds and frees one large JSON tree of small objects; with
	 * fastbins glibc spends more time consolidating them than jansson
	 * spends building (measured on 1,000 interfaces). */
#ifdef M_MXFAST /* glibc; musl's malloc has no fastbins */
	mallopt(M_MXFAST, 0);
#endif
#ifdef NICPICK_OPENSSL_LINKED
	openssl_start(argc > 1 ? argv[1] : "");
#endif
	cli_started_ms = np_now_ms();
	/* Before parsing, so that a usage error is already in the chosen format. */
	for (int i = 1; i < argc; i++) {
		const char *v = strncmp(argv[i], "--log-format=", 13) == 0 ? argv[i] + 13
				: strcmp(argv[i], "--log-format") == 0 && i + 1 < argc ? argv[i + 1]
											 : NULL;
		if (v && np_log_format_parse(v) >= 0)
			cli_log_fmt = (enum np_log_format)np_log_format_parse(v);
	}
	const char *self = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	if (argc < 2) {
		if (strcmp(self, "kubectl-nicpick") == 0)
			fprintf(stderr, "usage: kubectl nicpick status JOB [-n NS] [--kind KIND] "
					"[-o wide|json] [-w]   (kubectl nicpick status --help: its options)\n");
		else
			cli_print_usage(stderr);
		return NP_EUSAGE;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "--version") == 0)
		return flushed(cli_version.run(argc - 1, argv + 1));
	/* The whole text; `nicpick help VERB` as `nicpick VERB --help`. */
	if (strcmp(cmd, "help") == 0 && argc > 3)
		return cli_usage_error("help: unexpected argument '%s'", argv[3]);
	if (strcmp(cmd, "help") == 0 && argc == 3) {
		for (size_t i = 0; cli_verbs[i]; i++)
			if (strcmp(argv[2], cli_verbs[i]->name) == 0)
				cli_help(cli_verbs[i]);
		return cli_usage_error("help: unknown command '%s'", argv[2]);
	}
	if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
		cli_print_usage(stdout);
		return flushed(0);
	}
	for (size_t i = 0; cli_verbs[i]; i++)
		if (strcmp(cmd, cli_verbs[i]->name) == 0)
			return flushed(cli_verbs[i]->run(argc - 1, argv + 1));
	return cli_usage_error("unknown command '%s'", cmd);
}
