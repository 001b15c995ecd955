"""A pod's view of a cluster, for the static binary and the release image:
a "node" namespace whose eth0 reaches an "api" namespace holding the test
Kubernetes API server and a cluster DNS server, and the /etc/hosts and
/etc/resolv.conf that the kubelet writes into a pod.

    api ns   eth0 10.78.0.1/24 (API server, TLS, SANs 10.78.0.1 and
                               kube-api.test.internal unless told otherwise)
             eth0 10.78.0.53   (DNS: answers every query NXDOMAIN, logs names)
    node ns  eth0 10.78.0.2/24
    (PodNet(ipv6=True): api eth0 also fd78::1/64, node eth0 fd78::2/64)

The API server's name is in the pod's /etc/hosts (as hostAliases puts it);
any other name goes to the DNS server through resolv.conf's search path."""
import socket
import struct
import threading

import cluster as C
import netns as netns_mod

API_ADDR = "10.78.0.1"
DNS_ADDR = "10.78.0.53"
NODE_ADDR = "10.78.0.2"
API_ADDR6 = "fd78::1"   # PodNet(ipv6=True): an IPv6 service address too
NODE_ADDR6 = "fd78::2"
API_HOST = "kube-api.test.internal"
NAMESPACE = "train"
POD = "job-0"
POD_TOKEN = "tok-job-0"  # the ServiceAccount of deploy/rbac.yaml, under its Role
SA_DIR = "var/run/secrets/kubernetes.io/serviceaccount"

HOSTS = (f"# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n"
         f"{NODE_ADDR}\t{POD}\n\n# Entries added by HostAliases.\n{API_ADDR}\t{API_HOST}\n")
RESOLV = (f"search {NAMESPACE}.svc.cluster.local svc.cluster.local cluster.local\n"
          f"nameserver {DNS_ADDR}\noptions ndots:5\n")


class NxDns:
    """A cluster DNS that knows no name: NXDOMAIN for every query, and a
    record of the names asked, so a test sees what went to DNS."""

    def __init__(self, sock):
        self.sock, self.names, self._stop = sock, [], False
        self.thread = threading.Thread(target=self._serve, daemon=True, name="nxdns")
        self.thread.start()

    def _serve(self):
        self.sock.settimeout(0.2)
        while not self._stop:
            try:
                data, addr = self.sock.recvfrom(1500)
            except socket.timeout:
                continue
            except OSError:
                return
            if len(data) < 12:
                continue
            qid, flags, qd = struct.unpack("!HHH", data[:6])
            labels, i = [], 12
            while i < len(data) and data[i]:
                labels.append(data[i + 1:i + 1 + data[i]].decode(errors="replace"))
                i += 1 + data[i]
            self.names.append(".".join(labels))
            reply_flags = 0x8000 | (flags & 0x7900) | 0x0080 | 3  # QR, RD copied, RA, NXDOMAIN
            self.sock.sendto(struct.pack("!HHHHHH", qid, reply_flags, qd, 0, 0, 0)
                             + data[12:i + 5], addr)

    def close(self):
        self._stop = True
        self.thread.join(5)
        self.sock.close()


class PodNet:
    def __init__(self, factory, tmp, sans=(API_ADDR, API_HOST), ipv6=False):
        """sans: the names and addresses the API server's certificate
        holds (besides localhost's); ipv6: eth0 gets API_ADDR6/NODE_ADDR6 as
        well, and the API server listens on both addresses."""
        self.factory, self.tmp, self.sans, self.ipv6 = factory, tmp, list(sans), ipv6
        self.server = self.dns = None

    def start(self):
        from tools.kubeapi import Server
        self.api = self.factory.new("api")
        self.node = self.factory.new("node")
        netns_mod.veth(self.api, "eth0", self.node, "eth0", f"{API_ADDR}/24", f"{NODE_ADDR}/24")
        self.api.addr("eth0", f"{DNS_ADDR}/24")
        if self.ipv6:
            self.api.addr("eth0", f"{API_ADDR6}/64", nodad=True)
            self.node.addr("eth0", f"{NODE_ADDR6}/64", nodad=True)

        def bind_dns():
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((DNS_ADDR, 53))
            return s
        self.dns = NxDns(C.in_netns(self.api.name, bind_dns))
        self.server = Server(state_dir=str(self.tmp / "apiserver"),
                             listen="::" if self.ipv6 else API_ADDR,
                             sans=self.sans, namespace=NAMESPACE,
                             user="system:admin", authorization="RBAC",
                             tokens={POD_TOKEN: f"system:serviceaccount:{NAMESPACE}:"
                                                f"{C.SERVICE_ACCOUNT}"})
        C.in_netns(self.api.name, self.server.start)
        self.server.apply_manifests(str(C.RBAC_YAML), NAMESPACE)
        self.port = self.server.port
        self.url = f"https://{API_HOST}:{self.port}"
        self.ca_path = self.server.ca_path
        self.token_path = self.tmp / "pod-token"
        self.token_path.write_text(POD_TOKEN + "\n")
        self.server.create_pod(NAMESPACE, {
            "metadata": {"name": POD, "labels": {
                "batch.kubernetes.io/job-name": "job",
                "batch.kubernetes.io/job-completion-index": "0"}},
            "spec": {"nodeName": "n0", "containers": [{"name": "c", "image": "x"}]},
            "status": {"phase": "Running"}})
        return self

    def select_args(self, sa_dir="/" + SA_DIR, out_dir="/nicpick", server=None, smoke="off"):
        """select --peers k8s as the pod runs it, with the service account's
        files under sa_dir (smoke None: nicpick's default)."""
        return ["select", "--peers", "k8s", *(("--smoke", smoke) if smoke else ()),
                "--out-dir", out_dir,
                "--api-server", server or self.url, "--ca-file", f"{sa_dir}/ca.crt",
                "--token-file", f"{sa_dir}/token", "--namespace", NAMESPACE,
                "--pod-name", POD, "--expect", "1"]

    def result_annotation(self):
        pod = self.server.get_object(NAMESPACE, POD)
        return ((pod.get("metadata") or {}).get("annotations") or {}).get("nicpick.io/result")

    def close(self):
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self.dns is not None:
            self.dns.close()
            self.dns = None
