/* kubeconfig, read as kubectl reads it (client-go tools/clientcmd), into a
 * struct k8s_config the client uses; and exec credential plugins
 * (client.authentication.k8s.io/v1 and v1beta1).
 *
 * Files: an explicit path alone; otherwise every file of KUBECONFIG
 * (':'-separated, missing ones skipped), merged so that the first file to
 * set a map key (a cluster, user or context name) wins and current-context
 * comes from the first file that sets it; otherwise ~/.kube/config.
 * Relative paths resolve against the directory of the file that names them.
 * Anything that nicpick does not support is an error naming the field. */
#ifndef NP_K8S_KUBECONFIG_H
#define NP_K8S_KUBECONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "k8s/k8s.h"

struct k8s_kubeconfig_opts {
	const char *path;      /* --kubeconfig: this file alone; NULL: KUBECONFIG, then ~/.kube/config */
	const char *context;   /* --context; NULL: current-context */
	const char *namespace; /* -n; NULL: the context's namespace, else "default" */
};

/* Fill *cfg (server, TLS, credentials, namespace).  Free with
 * k8s_config_free(), also after a failure.  Errors are NP_EUSAGE for a bad
 * or unsupported kubeconfig, NP_EK8S for a failed credential plugin. */
int k8s_kubeconfig_load(struct k8s_config *cfg, const struct k8s_kubeconfig_opts *opts,
			np_error *err);

/* A PEM private key that is encrypted: a "-----BEGIN ENCRYPTED PRIVATE
 * KEY-----" block (PKCS#8, RFC 5958) or a "Proc-Type: 4,ENCRYPTED" header
 * (RFC 1421, OpenSSL's traditional keys).  client-go reads neither (Go's
 * crypto/tls X509KeyPair: "tls: failed to parse private key"), and
 * OpenSSL would ask for a pass phrase on the terminal. */
bool k8s_pem_key_encrypted(const char *pem);

/* An exec credential plugin, as the kubeconfig describes it. */
struct k8s_exec {
	char *api_version;  /* client.authentication.k8s.io/v1 or v1beta1 */
	char *command;      /* resolved against the kubeconfig's directory when it has a '/' */
	char **args;        /* NULL-terminated */
	char **env;         /* NULL-terminated "NAME=value", added to nicpick's environment */
	char *install_hint; /* shown when the command cannot be run */
};

/* What the plugin printed (an ExecCredential's status). */
struct k8s_exec_cred {
	char *token;    /* or NULL */
	char *cert_pem; /* clientCertificateData, with key_pem, or NULL */
	char *key_pem;
	time_t expiry;  /* expirationTimestamp; 0: none, valid until a 401 */
};

/* Run the plugin (stdin /dev/null, stdout read, stderr passed through) and
 * check what it printed.  A plugin still running after timeout_ms (<= 0:
 * no limit) is killed, and that is an error. */
int k8s_exec_run(const struct k8s_exec *x, int64_t timeout_ms, struct k8s_exec_cred *out,
		 np_error *err);
bool k8s_exec_cred_expired(const struct k8s_exec_cred *c, time_t now);
void k8s_exec_cred_free(struct k8s_exec_cred *c);
struct k8s_exec *k8s_exec_dup(const struct k8s_exec *x); /* NULL on ENOMEM */
void k8s_exec_free(struct k8s_exec *x);

/* Parse an ExecCredential (pure, for tests): api_version is what the
 * kubeconfig asked for. */
int k8s_exec_cred_parse(const char *json, size_t len, const char *api_version,
			struct k8s_exec_cred *out, np_error *err);

#endif
