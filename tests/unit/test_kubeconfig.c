/* lib/k8s/kubeconfig: kubeconfig files as kubectl reads them, and exec
 * credential plugins (small scripts written into a temporary directory). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "k8s/k8s_priv.h"
#include "k8s/kubeconfig.h"

#define KC_V1_TEST "client.authentication.k8s.io/v1"

static char dir[64];

static char *path_of(const char *name)
{
	static char buf[4][256];
	static int i;
	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", dir, name);
	return buf[i];
}

static void write_file(const char *name, const char *content, mode_t mode)
{
	const char *p = path_of(name);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(content, f);
	fclose(f);
	assert_int_equal(chmod(p, mode), 0);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/kubeconfig-unit-XXXXXX");
	assert_non_null(mkdtemp(dir));
	unsetenv("KUBECONFIG");
	setenv("HOME", dir, 1);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	unsetenv("KUBECONFIG");
	return 0;
}

/* Load path with context/namespace; expect success. */
static void load_ok(struct k8s_config *cfg, const char *path, const char *ctx, const char *ns)
{
	struct k8s_kubeconfig_opts o = { .path = path, .context = ctx, .namespace = ns };
	np_error err = { 0 };
	int rc = k8s_kubeconfig_load(cfg, &o, &err);
	if (rc < 0)
		fail_msg("k8s_kubeconfig_load: %s", err.msg);
}

/* Expect a failure whose message contains want; returns the status. */
static int load_fails(const char *path, const char *ctx, const char *want)
{
	struct k8s_kubeconfig_opts o = { .path = path, .context = ctx };
	struct k8s_config cfg;
	np_error err = { 0 };
	int rc = k8s_kubeconfig_load(&cfg, &o, &err);
	k8s_config_free(&cfg);
	assert_int_equal(rc, -1);
	if (!strstr(err.msg, want))
		fail_msg("error \"%s\" does not contain \"%s\"", err.msg, want);
	assert_null(strchr(err.msg, '\n'));
	return err.status;
}

#define CLUSTER(extra)                                                                      \
	"clusters:\n- name: c1\n  cluster:\n    server: https://10.0.0.1:6443/\n" extra
#define CTX(user, ns)                                                                       \
	"contexts:\n- name: ctx\n  context: {cluster: c1, user: " user ns "}\n"               \
	"current-context: ctx\n"

/* "hello\n" */
#define B64_HELLO "aGVsbG8K"
/* "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n" */
#define PEM_CERT "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
#define B64_CERT                                                                          \
	"LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="

static void test_token_and_context_namespace(void **state)
{
	(void)state;
	write_file("config", "apiVersion: v1\nkind: Config\n" CLUSTER("")
		   "users:\n- name: u\n  user: {token: abc.def}\n" CTX("u", ", namespace: team-a"),
		   0600);
	struct k8s_config cfg;
	load_ok(&cfg, path_of("config"), NULL, NULL);
	assert_string_equal(cfg.server, "https://10.0.0.1:6443");
	assert_string_equal(cfg.token, "abc.def");
	assert_null(cfg.token_file);
	assert_string_equal(cfg.namespace, "team-a");
	assert_null(cfg.ca_file);
	assert_null(cfg.ca_pem);
	assert_false(cfg.insecure_skip_tls_verify);
	/* a kubeconfig's credential: the TLS library's own groups */
	assert_null(cfg.tls_groups);
	k8s_config_free(&cfg);
	/* -n wins over the context's namespace */
	load_ok(&cfg, path_of("config"), NULL, "other");
	assert_string_equal(cfg.namespace, "other");
	k8s_config_free(&cfg);
}

static void test_namespace_defaults_to_default(void **state)
{
	(void)state;
	write_file("config", CLUSTER("    insecure-skip-tls-verify: true\n    tls-server-name: api.example\n")
		   "users:\n- name: u\n  user: {}\n" CTX("u", ""), 0600);
	struct k8s_config cfg;
	load_ok(&cfg, path_of("config"), NULL, NULL);
	assert_string_equal(cfg.namespace, "default");
	assert_true(cfg.insecure_skip_tls_verify);
	assert_string_equal(cfg.tls_server_name, "api.example");
	assert_null(cfg.token);
	k8s_config_free(&cfg);
}

static void test_home_kube_config_is_the_default(void **state)
{
	(void)state;
	char kube[256];
	snprintf(kube, sizeof(kube), "%s/.kube", dir);
	assert_int_equal(mkdir(kube, 0700), 0);
	write_file(".kube/config", CLUSTER("") "users:\n- name: u\n  user: {token: home}\n" CTX("u", ""),
		   0600);
	struct k8s_config cfg;
	load_ok(&cfg, NULL, NULL, NULL);
	assert_string_equal(cfg.token, "home");
	k8s_config_free(&cfg);
}

static void test_token_file_relative_to_kubeconfig(void **state)
{
	(void)state;
	char sub[256];
	snprintf(sub, sizeof(sub), "%s/sub", dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	write_file("sub/token", "tok-from-file\n", 0600);
	write_file("sub/config", CLUSTER("") "users:\n- name: u\n  user:\n    tokenFile: token\n"
		   "    token: ignored-when-the-file-is-set\n" CTX("u", ""), 0600);
	struct k8s_config cfg;
	load_ok(&cfg, path_of("sub/config"), NULL, NULL);
	assert_string_equal(cfg.token_file, path_of("sub/token"));
	assert_null(cfg.token);
	k8s_config_free(&cfg);
	write_file("sub/config", CLUSTER("") "users:\n- name: u\n  user: {tokenFile: missing}\n"
		   CTX("u", ""), 0600);
	load_fails(path_of("sub/config"), NULL, "tokenFile");
}

static void test_client_cert_and_ca_data(void **state)
{
	(void)state;
	write_file("config", CLUSTER("    certificate-authority-data: " B64_CERT "\n")
		   "users:\n- name: u\n  user:\n    client-certificate-data: " B64_CERT "\n"
		   "    client-key-data: " B64_HELLO "\n" CTX("u", ""), 0600);
	struct k8s_config cfg;
	load_ok(&cfg, path_of("config"), NULL, NULL);
	assert_string_equal(cfg.ca_pem, PEM_CERT);
	assert_string_equal(cfg.client_cert_pem, PEM_CERT);
	assert_string_equal(cfg.client_key_pem, "hello\n");
	assert_null(cfg.client_cert_file);
	k8s_config_free(&cfg);
}

static void test_client_cert_and_ca_files(void **state)
{
	(void)state;
	write_file("ca.crt", PEM_CERT, 0600);
	write_file("u.crt", PEM_CERT, 0600);
	write_file("u.key", "key", 0600);
	write_file("config", CLUSTER("    certificate-authority: ca.crt\n")
		   "users:\n- name: u\n  user:\n    client-certificate: u.crt\n"
		   "    client-key: u.key\n" CTX("u", ""), 0600);
	struct k8s_config cfg;
	load_ok(&cfg, path_of("config"), NULL, NULL);
	assert_string_equal(cfg.ca_file, path_of("ca.crt"));
	assert_string_equal(cfg.client_cert_file, path_of("u.crt"));
	assert_string_equal(cfg.client_key_file, path_of("u.key"));
	k8s_config_free(&cfg);
	/* a certificate without its key */
	write_file("config", CLUSTER("") "users:\n- name: u\n  user: {client-certificate: u.crt}\n"
		   CTX("u", ""), 0600);
	assert_int_equal(load_fails(path_of("config"), NULL, "client-certificate without client-key"),
			 NP_EUSAGE);
	write_file("config", CLUSTER("    certificate-authority: nope.crt\n")
		   "users:\n- name: u\n  user: {}\n" CTX("u", ""), 0600);
	load_fails(path_of("config"), NULL, "certificate-authority");
	write_file("config", CLUSTER("    certificate-authority-data: '!!notbase64'\n")
		   "users:\n- name: u\n  user: {}\n" CTX("u", ""), 0600);
	load_fails(path_of("config"), NULL, "certificate-authority-data is not base64");
}

/* Encrypted client keys, in the two forms OpenSSL writes them (openssl ec
 * -aes256: a traditional key with RFC 1421 headers; openssl pkcs8 -topk8:
 * PKCS#8's EncryptedPrivateKeyInfo), are refused at load with the file or
 * the field named, as kubectl refuses them ("tls: failed to parse private
 * key"), instead of OpenSSL asking for a pass phrase on the terminal. */
#define TRAD_ENC "-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n"                    \
		 "DEK-Info: AES-256-CBC,584C0CF798D03F66C1A0F2B6F2E1E3B4\n\nMHcCAQ\n"              \
		 "-----END EC PRIVATE KEY-----\n"
#define PKCS8_ENC "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIHsMFcGCSqG\n"                      \
		  "-----END ENCRYPTED PRIVATE KEY-----\n"
/* base64 of PKCS8_ENC */
#define B64_PKCS8_ENC                                                                      \
	"LS0tLS1CRUdJTiBFTkNSWVBURUQgUFJJVkFURSBLRVktLS0tLQpNSUhzTUZjR0NTcUcKLS0tLS1FTkQgRU5DUllQ" \
	"VEVEIFBSSVZBVEUgS0VZLS0tLS0K"

static void test_encrypted_client_keys_are_refused(void **state)
{
	(void)state;
	const char *keys[] = { TRAD_ENC, PKCS8_ENC,
			       /* CRLF line ends, as a key saved on Windows */
			       "-----BEGIN RSA PRIVATE KEY-----\r\nProc-Type: 4,ENCRYPTED\r\n"
			       "DEK-Info: AES-128-CBC,00\r\n\r\nMIIE\r\n-----END RSA PRIVATE KEY-----\r\n" };
	write_file("u.crt", PEM_CERT, 0600);
	write_file("config", CLUSTER("") "users:\n- name: u\n  user:\n    client-certificate: u.crt\n"
		   "    client-key: u.key\n" CTX("u", ""), 0600);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		write_file("u.key", keys[i], 0600);
		char want[600];
		snprintf(want, sizeof(want), "user \"u\": %s is an encrypted key; kubectl and nicpick read "
			 "only unencrypted ones, as openssl pkey writes them", path_of("u.key"));
		assert_int_equal(load_fails(path_of("config"), NULL, want), NP_EUSAGE);
	}
	/* An unencrypted key passes. */
	write_file("u.key", "-----BEGIN PRIVATE KEY-----\nMIGHAgEA\n-----END PRIVATE KEY-----\n", 0600);
	struct k8s_config cfg;
	load_ok(&cfg, path_of("config"), NULL, NULL);
	assert_string_equal(cfg.client_key_file, path_of("u.key"));
	k8s_config_free(&cfg);
	write_file("config", CLUSTER("") "users:\n- name: u\n  user:\n    client-certificate-data: "
		   B64_CERT "\n    client-key-data: " B64_PKCS8_ENC "\n" CTX("u", ""), 0600);
	assert_int_equal(load_fails(path_of("config"), NULL, "client-key-data is an encrypted key"),
			 NP_EUSAGE);
	assert_false(k8s_pem_key_encrypted("-----BEGIN EC PRIVATE KEY-----\nMHcCAQ\n"));
	assert_true(k8s_pem_key_encrypted(TRAD_ENC));
}

/* A plugin that prints an ExecCredential; it counts its runs in ./runs. */
static void write_plugin(const char *name, const char *api, const char *status)
{
	char script[2048];
	snprintf(script, sizeof(script),
		 "#!/bin/sh\n"
		 "echo run >> \"%s/runs\"\n"
		 "case \"$KUBERNETES_EXEC_INFO\" in *'\"interactive\":false'*) ;; *) exit 3;; esac\n"
		 "printf '{\"kind\":\"ExecCredential\",\"apiVersion\":\"%s\",\"status\":%s}'\n",
		 dir, api, status);
	write_file(name, script, 0700);
}

static int runs(void)
{
	FILE *f = fopen(path_of("runs"), "r");
	if (!f)
		return 0;
	int n = 0;
	char line[64];
	while (fgets(line, sizeof(line), f))
		n++;
	fclose(f);
	return n;
}

static void test_exec_v1_args_and_env(void **state)
{
	(void)state;
	write_plugin("plugin", KC_V1_TEST, "{\"token\":\"'\"$1-$TEAM\"'\"}");
	write_file("config", CLUSTER("") "users:\n- name: u\n  user:\n    exec:\n"
		   "      apiVersion: client.authentication.k8s.io/v1\n"
		   "      command: ./plugin\n      args: [get-token, --x]\n"
		   "      env: [{name: TEAM, value: blue}]\n"
		   "      interactiveMode: Never\n" CTX("u", ""), 0600);
	struct k8s_config cfg;
	load_ok(&cfg, path_of("config"), NULL, NULL);
	assert_non_null(cfg.exec);
	assert_string_equal(cfg.exec->command, path_of("./plugin"));
	assert_string_equal(cfg.exec->args[0], "get-token");
	assert_string_equal(cfg.exec->args[1], "--x");
	assert_null(cfg.exec->args[2]);
	assert_string_equal(cfg.exec->env[0], "TEAM=blue");
	struct k8s_exec_cred cred;
	np_error err = { 0 };
	if (k8s_exec_run(cfg.exec, 10000, &cred, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(cred.token, "get-token-blue");
	assert_int_equal(cred.expiry, 0);
	k8s_exec_cred_free(&cred);
	k8s_config_free(&cfg);
}

static void test_exec_v1beta1_client_cert(void **state)
{
	(void)state;
	write_plugin("plugin", "client.authentication.k8s.io/v1beta1",
		     "{\"clientCertificateData\":\"CERT\",\"clientKeyData\":\"KEY\","
		     "\"expirationTimestamp\":\"2099-01-02T03:04:05Z\"}");
	/* v1beta1: interactiveMode may be left out (IfAvailable) */
	write_file("config", CLUSTER("") "users:\n- name: u\n  user:\n    exec:\n"
		   "      apiVersion: client.authentication.k8s.io/v1beta1\n"
		   "      command: ./plugin\n" CTX("u", ""), 0600);
	struct k8s_config cfg;
	load_ok(&cfg, path_of("config"), NULL, NULL);
	struct k8s_exec_cred cred;
	np_error err = { 0 };
	if (k8s_exec_run(cfg.exec, 10000, &cred, &err) < 0)
		fail_msg("%s", err.msg);
	assert_null(cred.token);
	assert_string_equal(cred.cert_pem, "CERT");
	assert_string_equal(cred.key_pem, "KEY");
	assert_int_equal(cred.expiry, 4071006245);
	assert_false(k8s_exec_cred_expired(&cred, 4071006244));
	assert_true(k8s_exec_cred_expired(&cred, 4071006245));
	k8s_exec_cred_free(&cred);
	/* an encrypted clientKeyData is refused, as kubectl refuses it */
	write_plugin("plugin", "client.authentication.k8s.io/v1beta1",
		     "{\"clientCertificateData\":\"CERT\",\"clientKeyData\":"
		     "\"-----BEGIN ENCRYPTED PRIVATE KEY-----\\\\nMIHs\\\\n\"}");
	assert_int_equal(k8s_exec_run(cfg.exec, 10000, &cred, &err), -1);
	assert_non_null(strstr(err.msg, "status.clientKeyData is an encrypted key"));
	assert_int_equal(err.status, NP_EK8S);
	k8s_config_free(&cfg);
}

/* The client keeps a credential until it expires: one in the past is
 * fetched again before every request, one in the future is not. */
static void refresh_twice(const char *expiry, int want_runs)
{
	char status[256];
	snprintf(status, sizeof(status), "{\"token\":\"t\",\"expirationTimestamp\":\"%s\"}", expiry);
	write_plugin("plugin", KC_V1_TEST, status);
	unlink(path_of("runs"));
	write_file("config", CLUSTER("") "users:\n- name: u\n  user:\n    exec:\n"
		   "      apiVersion: client.authentication.k8s.io/v1\n"
		   "      command: ./plugin\n      interactiveMode: IfAvailable\n" CTX("u", ""), 0600);
	struct k8s_config cfg;
	load_ok(&cfg, path_of("config"), NULL, NULL);
	struct k8s_client *c = NULL;
	np_error err = { 0 };
	if (k8s_client_new(&c, &cfg, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(k8s_token_refresh(c, false, &err), 0);
	assert_int_equal(k8s_token_refresh(c, false, &err), 0);
	assert_int_equal(runs(), want_runs);
	/* a 401 forces a new credential */
	assert_int_equal(k8s_token_refresh(c, true, &err), 0);
	assert_int_equal(runs(), want_runs + 1);
	k8s_client_free(c);
	k8s_config_free(&cfg);
}

static void test_exec_expired_credential_reruns(void **state)
{
	(void)state;
	refresh_twice("2020-01-01T00:00:00Z", 2);
	refresh_twice("2099-01-01T00:00:00.123+02:00", 1);
}

static void test_exec_errors(void **state)
{
	(void)state;
	const char *head = CLUSTER("") "users:\n- name: u\n  user:\n    exec:\n";
	char buf[2048];
	/* v1 needs interactiveMode */
	snprintf(buf, sizeof(buf), "%s      apiVersion: client.authentication.k8s.io/v1\n"
		 "      command: x\n" CTX("u", ""), head);
	write_file("config", buf, 0600);
	load_fails(path_of("config"), NULL, "users[].user.exec.interactiveMode is required");
	snprintf(buf, sizeof(buf), "%s      apiVersion: client.authentication.k8s.io/v1\n"
		 "      command: x\n      interactiveMode: Always\n" CTX("u", ""), head);
	write_file("config", buf, 0600);
	load_fails(path_of("config"), NULL, "exec.interactiveMode: Always is not supported");
	snprintf(buf, sizeof(buf), "%s      apiVersion: client.authentication.k8s.io/v1alpha1\n"
		 "      command: x\n" CTX("u", ""), head);
	write_file("config", buf, 0600);
	load_fails(path_of("config"), NULL, "exec.apiVersion is not supported");

	/* a command that is not there: the install hint says what to do */
	snprintf(buf, sizeof(buf), "%s      apiVersion: client.authentication.k8s.io/v1\n"
		 "      command: nicpick-no-such-plugin\n      interactiveMode: Never\n"
		 "      installHint: install it with apt-get install foo\n" CTX("u", ""), head);
	write_file("config", buf, 0600);
	struct k8s_config cfg;
	load_ok(&cfg, path_of("config"), NULL, NULL);
	assert_string_equal(cfg.exec->command, "nicpick-no-such-plugin"); /* PATH lookup */
	struct k8s_exec_cred cred;
	np_error err = { 0 };
	assert_int_equal(k8s_exec_run(cfg.exec, 10000, &cred, &err), -1);
	assert_int_equal(err.status, NP_EK8S);
	assert_non_null(strstr(err.msg, "nicpick-no-such-plugin"));
	assert_non_null(strstr(err.msg, "(install it with apt-get install foo)"));
	k8s_config_free(&cfg);

	/* a plugin that fails, one that prints the wrong version, one that
	 * prints nothing usable */
	struct k8s_exec x = { .api_version = KC_V1_TEST, .command = path_of("plugin") };
	char *none[] = { NULL };
	x.args = none;
	x.env = none;
	write_file("plugin", "#!/bin/sh\nexit 7\n", 0700);
	assert_int_equal(k8s_exec_run(&x, 10000, &cred, &err), -1);
	assert_non_null(strstr(err.msg, "exited 7"));
	write_plugin("plugin", "client.authentication.k8s.io/v1beta1", "{\"token\":\"t\"}");
	assert_int_equal(k8s_exec_run(&x, 10000, &cred, &err), -1);
	assert_non_null(strstr(err.msg, "printed apiVersion client.authentication.k8s.io/v1beta1"));
	write_plugin("plugin", KC_V1_TEST, "{}");
	assert_int_equal(k8s_exec_run(&x, 10000, &cred, &err), -1);
	assert_non_null(strstr(err.msg, "neither status.token nor status.clientCertificateData"));
	write_plugin("plugin", KC_V1_TEST, "{\"token\":\"t\",\"expirationTimestamp\":\"tomorrow\"}");
	assert_int_equal(k8s_exec_run(&x, 10000, &cred, &err), -1);
	assert_non_null(strstr(err.msg, "expirationTimestamp is not an RFC 3339 time"));
	write_file("plugin", "#!/bin/sh\necho not json\n", 0700);
	assert_int_equal(k8s_exec_run(&x, 10000, &cred, &err), -1);
	assert_non_null(strstr(err.msg, "printed no ExecCredential"));
	/* a plugin that hangs is killed at the deadline */
	write_file("plugin", "#!/bin/sh\nexec sleep 30\n", 0700);
	time_t t0 = time(NULL);
	assert_int_equal(k8s_exec_run(&x, 300, &cred, &err), -1);
	assert_true(time(NULL) - t0 < 5);
	assert_non_null(strstr(err.msg, "printed no credential within 300 ms"));
}

/* KUBECONFIG=a:b: the first file to set a name wins, entries are not
 * merged field by field, and current-context comes from the first file
 * that sets it (client-go's loader.go). */
static void test_two_files_merged(void **state)
{
	(void)state;
	write_file("a", "users:\n- name: u\n  user: {token: from-a}\n"
		   "contexts:\n- name: ctx\n  context: {cluster: c1, user: u}\n", 0600);
	write_file("b", CLUSTER("") "users:\n- name: u\n  user: {token: from-b, "
		   "client-certificate-data: " B64_CERT "}\n"
		   "- name: u2\n  user: {token: u2}\n"
		   "contexts:\n- name: ctx\n  context: {cluster: c1, user: u2}\n"
		   "- name: other\n  context: {cluster: c1, user: u2, namespace: ns-b}\n"
		   "current-context: other\n", 0600);
	char env[600];
	snprintf(env, sizeof(env), "%s:%s:%s", path_of("a"), path_of("missing-is-skipped"),
		 path_of("b"));
	setenv("KUBECONFIG", env, 1);
	struct k8s_config cfg;
	load_ok(&cfg, NULL, NULL, NULL); /* a sets no current-context: b's */
	assert_string_equal(cfg.token, "u2");
	assert_string_equal(cfg.namespace, "ns-b");
	k8s_config_free(&cfg);
	load_ok(&cfg, NULL, "ctx", NULL); /* a's ctx and a's whole user u */
	assert_string_equal(cfg.token, "from-a");
	assert_null(cfg.client_cert_pem);
	k8s_config_free(&cfg);
	write_file("a", "current-context: ctx\n", 0600);
	load_ok(&cfg, NULL, NULL, NULL);
	assert_string_equal(cfg.token, "u2"); /* a's current-context, b's ctx */
	k8s_config_free(&cfg);
	/* --kubeconfig: that file alone; a missing one is an error */
	load_fails(path_of("a"), NULL, "context \"ctx\" does not exist");
	load_fails(path_of("nope"), NULL, "kubeconfig");
	unsetenv("KUBECONFIG");
}

static void test_missing_context_cluster_user(void **state)
{
	(void)state;
	write_file("config", CLUSTER("") "users:\n- name: u\n  user: {}\n" CTX("u", ""), 0600);
	assert_int_equal(load_fails(path_of("config"), "prod", "context \"prod\" does not exist"),
			 NP_EUSAGE);
	write_file("config", CLUSTER("") CTX("ghost", ""), 0600);
	load_fails(path_of("config"), NULL, "user \"ghost\" (of context \"ctx\") does not exist");
	write_file("config", "contexts:\n- name: ctx\n  context: {cluster: gone}\ncurrent-context: ctx\n",
		   0600);
	load_fails(path_of("config"), NULL, "cluster \"gone\" (of context \"ctx\") does not exist");
	write_file("config", CLUSTER("") "users: []\n", 0600);
	load_fails(path_of("config"), NULL, "no current-context is set");
	write_file("config", "", 0600); /* empty: an empty config */
	load_fails(path_of("config"), NULL, "no current-context is set");
}

static void test_bad_yaml(void **state)
{
	(void)state;
	write_file("config", "clusters:\n- name: c1\n  cluster: {server: [unclosed\n", 0600);
	assert_int_equal(load_fails(path_of("config"), NULL, "line "), NP_EUSAGE);
	write_file("config", "- just\n- a list\n", 0600);
	load_fails(path_of("config"), NULL, "not a kubeconfig");
	write_file("config", "clusters: {c1: {}}\n", 0600);
	load_fails(path_of("config"), NULL, "clusters must be a list");
	write_file("config", CLUSTER("    insecure-skip-tls-verify: maybe\n"), 0600);
	load_fails(path_of("config"), NULL, "insecure-skip-tls-verify must be true or false");
	write_file("config", "kind: Pod\n", 0600);
	load_fails(path_of("config"), NULL, "kind is not Config");
	write_file("config", "users: []\nusers: []\n", 0600);
	load_fails(path_of("config"), NULL, "users appears twice");
}

static void test_unsupported_fields_name_the_field(void **state)
{
	(void)state;
	static const struct {
		const char *user, *cluster_extra, *want;
	} cases[] = {
		{ "{auth-provider: {name: gcp}}", "", "user \"u\": auth-provider is not supported" },
		{ "{username: admin, password: secret}", "", "user \"u\": username is not supported" },
		{ "{password: secret}", "", "user \"u\": password is not supported" },
		{ "{as: someone}", "", "user \"u\": as is not supported" },
		{ "{}", "    proxy-url: http://proxy:3128\n",
		  "cluster \"c1\": proxy-url is not supported: set HTTPS_PROXY" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[1024];
		snprintf(buf, sizeof(buf),
			 "clusters:\n- name: c1\n  cluster:\n    server: https://h\n%s"
			 "users:\n- name: u\n  user: %s\n" CTX("u", ""),
			 cases[i].cluster_extra, cases[i].user);
		write_file("config", buf, 0600);
		assert_int_equal(load_fails(path_of("config"), NULL, cases[i].want), NP_EUSAGE);
	}
	/* only an error for the entry the context uses */
	write_file("config", CLUSTER("") "users:\n- name: u\n  user: {token: t}\n"
		   "- name: old\n  user: {auth-provider: {name: oidc}}\n" CTX("u", ""), 0600);
	struct k8s_config cfg;
	load_ok(&cfg, path_of("config"), NULL, NULL);
	assert_string_equal(cfg.token, "t");
	k8s_config_free(&cfg);
}

static void test_config_copy_keeps_kubeconfig_fields(void **state)
{
	(void)state;
	write_plugin("plugin", KC_V1_TEST, "{\"token\":\"t\"}");
	write_file("config", CLUSTER("    certificate-authority-data: " B64_CERT "\n"
				     "    tls-server-name: api.example\n")
		   "users:\n- name: u\n  user:\n    exec:\n"
		   "      apiVersion: client.authentication.k8s.io/v1\n"
		   "      command: ./plugin\n      interactiveMode: Never\n" CTX("u", ""), 0600);
	struct k8s_config cfg;
	load_ok(&cfg, path_of("config"), NULL, NULL);
	struct k8s_client *c = NULL;
	np_error err = { 0 };
	if (k8s_client_new(&c, &cfg, &err) < 0)
		fail_msg("%s", err.msg);
	k8s_config_free(&cfg);
	const struct k8s_config *cc = k8s_client_config(c);
	assert_string_equal(cc->ca_pem, PEM_CERT);
	assert_string_equal(cc->tls_server_name, "api.example");
	assert_string_equal(cc->exec->command, path_of("./plugin"));
	/* tls-server-name: the URL names it, the connection goes to the server */
	assert_string_equal(c->base_url, "https://api.example:6443");
	assert_string_equal(c->connect_to->data, "api.example:6443:10.0.0.1:6443");
	assert_string_equal(c->host_header, "Host: 10.0.0.1:6443");
	k8s_client_free(c);
}

__attribute__((format(printf, 1, 2))) static void sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	char full[2300];
	snprintf(full, sizeof(full), "cd '%s' && { %s; } >>openssl.log 2>&1", dir, cmd);
	if (system(full) != 0)
		fail_msg("failed: %s (see %s/openssl.log)", cmd, dir);
}

static char *slurp_trimmed(const char *name)
{
	FILE *f = fopen(path_of(name), "r");
	assert_non_null(f);
	static char buf[8192];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	buf[n] = '\0';
	return strdup(buf);
}

/* A TLS server that verifies client certificates: openssl s_server -WWW,
 * with a certificate for api.example only (not for 127.0.0.1). */
static pid_t start_tls_server(int *port)
{
	sh("openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=test-ca");
	sh("openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=api.example"
	   " && printf 'subjectAltName=DNS:api.example\\n' > srv.ext"
	   " && openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2"
	   " -extfile srv.ext -out srv.crt");
	sh("openssl req -newkey rsa:2048 -nodes -keyout cl.key -out cl.csr -subj /CN=alice/O=team"
	   " && openssl x509 -req -in cl.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -out cl.crt");
	sh("openssl base64 -A -in ca.crt > ca.b64 && openssl base64 -A -in cl.key > cl.key.b64");
	write_file("obj.json", "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"}}\n", 0644);
	for (int attempt = 0; attempt < 20; attempt++) {
		*port = 20000 + (int)((getpid() * 7 + attempt * 131 + time(NULL)) % 20000);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			char acc[32];
			snprintf(acc, sizeof(acc), "127.0.0.1:%d", *port);
			if (chdir(dir) < 0)
				_exit(127);
			freopen("/dev/null", "r", stdin);
			freopen("s_server.log", "a", stdout);
			freopen("s_server.log", "a", stderr);
			execlp("openssl", "openssl", "s_server", "-accept", acc, "-cert", "srv.crt",
			       "-key", "srv.key", "-CAfile", "ca.crt", "-Verify", "1", "-WWW", "-quiet",
			       (char *)NULL);
			_exit(127);
		}
		for (int i = 0; i < 100; i++) {
			int fd = socket(AF_INET, SOCK_STREAM, 0);
			struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)*port) };
			sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
			int ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
			close(fd);
			if (ok)
				return pid;
			int st;
			if (waitpid(pid, &st, WNOHANG) == pid)
				break; /* port taken: try another */
			usleep(20000);
		}
		kill(pid, SIGTERM);
		waitpid(pid, NULL, 0);
	}
	fail_msg("openssl s_server did not start (see %s/s_server.log)", dir);
	return -1;
}

static int get_obj(const char *kubeconfig, np_error *err)
{
	struct k8s_config cfg;
	load_ok(&cfg, kubeconfig, NULL, NULL);
	struct k8s_client *c = NULL;
	int rc = k8s_client_new(&c, &cfg, err);
	k8s_config_free(&cfg);
	if (rc < 0)
		return -1;
	k8s_client_set_timeout(c, 3);
	json_t *obj = NULL;
	rc = k8s_get(c, "/obj.json", &obj, err);
	if (rc == 0)
		assert_string_equal(json_string_value(json_object_get(obj, "kind")), "Pod");
	json_decref(obj);
	k8s_client_free(c);
	return rc;
}

#define TLS_CONFIG                                                                        \
	"clusters:\n- name: c1\n  cluster:\n    server: https://127.0.0.1:%d\n"             \
	"    certificate-authority-data: %s\n%s"                                             \
	"users:\n- name: u\n  user:\n%s" CTX("u", "")

/* The client as libcurl runs it: CA data, a client certificate file with
 * its key as data, and tls-server-name all reach the TLS handshake. */
static void test_client_certificate_and_tls_server_name_over_tls(void **state)
{
	(void)state;
	int port;
	pid_t srv = start_tls_server(&port);
	char *ca = slurp_trimmed("ca.b64"), *key = slurp_trimmed("cl.key.b64");
	char buf[16384];
	char user[8192];
	snprintf(user, sizeof(user), "    client-certificate: cl.crt\n    client-key-data: %s\n", key);
	np_error err = { 0 };

	snprintf(buf, sizeof(buf), TLS_CONFIG, port, ca, "    tls-server-name: api.example\n", user);
	write_file("config", buf, 0600);
	if (get_obj(path_of("config"), &err) < 0)
		fail_msg("%s", err.msg);

	/* without tls-server-name the certificate does not match 127.0.0.1 */
	snprintf(buf, sizeof(buf), TLS_CONFIG, port, ca, "", user);
	write_file("config", buf, 0600);
	assert_int_equal(get_obj(path_of("config"), &err), -1);
	assert_non_null(strstr(err.msg, "127.0.0.1"));
	assert_int_equal(err.status, NP_EK8S);

	/* without a client certificate the server refuses the handshake */
	snprintf(buf, sizeof(buf), TLS_CONFIG, port, ca, "    tls-server-name: api.example\n",
		 "    token: t\n");
	write_file("config", buf, 0600);
	assert_int_equal(get_obj(path_of("config"), &err), -1);
	assert_non_null(strstr(err.msg, "certificate required"));

	/* an exec plugin's client certificate works as well */
	char *crt = slurp_trimmed("cl.crt"), *pem = slurp_trimmed("cl.key");
	json_t *status = json_pack("{s:s, s:s}", "clientCertificateData", crt, "clientKeyData", pem);
	char *js = json_dumps(status, JSON_COMPACT);
	write_file("cred.json", "", 0600);
	FILE *f = fopen(path_of("cred.json"), "w");
	fprintf(f, "{\"kind\":\"ExecCredential\",\"apiVersion\":\"%s\",\"status\":%s}", KC_V1_TEST, js);
	fclose(f);
	char script[512];
	snprintf(script, sizeof(script), "#!/bin/sh\ncat '%s'\n", path_of("cred.json"));
	write_file("plugin", script, 0700);
	snprintf(buf, sizeof(buf), TLS_CONFIG, port, ca, "    tls-server-name: api.example\n",
		 "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
		 "      command: ./plugin\n      interactiveMode: Never\n");
	write_file("config", buf, 0600);
	if (get_obj(path_of("config"), &err) < 0)
		fail_msg("%s", err.msg);
	free(js);
	json_decref(status);
	free(crt), free(pem), free(ca), free(key);
	kill(srv, SIGTERM);
	waitpid(srv, NULL, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_token_and_context_namespace, setup, teardown),
		cmocka_unit_test_setup_teardown(test_namespace_defaults_to_default, setup, teardown),
		cmocka_unit_test_setup_teardown(test_home_kube_config_is_the_default, setup, teardown),
		cmocka_unit_test_setup_teardown(test_token_file_relative_to_kubeconfig, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_cert_and_ca_data, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_cert_and_ca_files, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exec_v1_args_and_env, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exec_v1beta1_client_cert, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exec_expired_credential_reruns, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exec_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_files_merged, setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_context_cluster_user, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_yaml, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unsupported_fields_name_the_field, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_copy_keeps_kubeconfig_fields, setup, teardown),
		cmocka_unit_test_setup_teardown(test_encrypted_client_keys_are_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_certificate_and_tls_server_name_over_tls, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
