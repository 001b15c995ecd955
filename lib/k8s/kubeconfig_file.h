/* One kubeconfig file, parsed once (libyaml's document API) into the
 * structs below: what kubeconfig.c merges and resolves.  Private to
 * lib/k8s. */
#ifndef NP_K8S_KUBECONFIG_FILE_H
#define NP_K8S_KUBECONFIG_FILE_H

#include <stdbool.h>
#include <stddef.h>

#include "k8s/kubeconfig.h"

struct kc_cluster {
	char *name, *server, *ca_file, *ca_data, *tls_server_name;
	bool insecure;
	char *unsupported; /* the first unsupported field, as an error message */
};

struct kc_user {
	char *name, *token, *token_file, *cert_file, *cert_data, *key_file, *key_data;
	struct k8s_exec *exec;
	char *unsupported;
};

struct kc_context {
	char *name, *cluster, *user, *namespace;
};

struct kc_file {
	char *path, *dir;
	char *current_context;
	struct kc_cluster *clusters;
	struct kc_user *users;
	struct kc_context *contexts;
	size_t nclusters, nusers, ncontexts;
};

/* Read and parse the file at path into *f.  Returns 0, 1 when it does not
 * exist, -1 on an error (err set).  Free *f with kc_file_free() in every
 * case. */
int kc_file_load(const char *path, struct kc_file *f, np_error *err);
void kc_file_free(struct kc_file *f);

#endif
