# Sourced by the GPU scripts: two network namespaces $A and $B as two nodes,
# joined by one veth link (va 10.9.0.1 / vb 10.9.0.2), each with a decoy cni0
# bridge at the same address (10.244.0.1/24) that holds a veth pair, as a CNI
# leaves it.  Needs ip() defined and A, B set; the fast link is created first,
# so NCCL's default lists it before the decoy.
make_nodes() {
	ip netns add "$A" && ip netns add "$B" || return 1
	ip link add va netns "$A" type veth peer name vb netns "$B"
	ip -n "$A" addr add 10.9.0.1/24 dev va; ip -n "$B" addr add 10.9.0.2/24 dev vb
	for ns in "$A" "$B"; do
		ip -n "$ns" link set lo up
		ip -n "$ns" link add cni0 type bridge
		ip -n "$ns" addr add 10.244.0.1/24 dev cni0
		ip -n "$ns" link add vc0 type veth peer name vc1
		ip -n "$ns" link set vc0 master cni0
		for l in cni0 vc0 vc1; do ip -n "$ns" link set "$l" up; done
	done
	ip -n "$A" link set va up; ip -n "$B" link set vb up
}

# check NAME EXPECTED-EXIT ACTUAL-EXIT [PATTERN FILE]: a PASS/FAIL line;
# counts failures in $fails.
check() {
	if [ "$2" = "$3" ] && { [ $# -lt 5 ] || grep -q -- "$4" "$5"; }; then
		echo "PASS: $1 (exit $3)"
	else
		echo "FAIL: $1: expected exit $2${4:+ and /$4/}, got $3"
		fails=$((fails + 1))
	fi
}
