/* A header of its own, without nicpick's other headers, so that
 * bench/tls-get.c makes its reference handshake as nicpick does. */
#ifndef NP_K8S_TLS_GROUPS_H
#define NP_K8S_TLS_GROUPS_H

/* The groups offered under a pod's own credential (k8s_config_load: the
 * service account's token, or --token-file): P-256 with its key share,
 * X25519 and P-384 without.  P-256 is the group every TLS 1.3 server must
 * take (RFC 8446 9.1), and Go's crypto/tls (the API server's) takes a key
 * share it was sent before a group it prefers, so no HelloRetryRequest
 * (handshake_server_tls13.go: "priority is given to groups that the
 * client provided a keyShare for, so to avoid a round-trip").
 * Not the hybrid post-quantum X25519MLKEM768, OpenSSL 3.5's first: it
 * made a follower 12 % dearer in instructions, and what it protects
 * against, traffic recorded now and decrypted by a quantum computer years
 * later, would find nothing of value: the pod's token is bound to its pod
 * and dies with it, and the annotations nicpick writes can be read by
 * anyone who may list the job's pods (docs/security.md).  A kubeconfig's
 * credentials (`nicpick status`, often long-lived) keep the library's
 * groups. */
#define K8S_TLS_GROUPS_POD "secp256r1:X25519:secp384r1"

#endif
