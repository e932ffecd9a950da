//go:build ignore

/* netdrift nf_tables notification stamp.
 *
 * A socket filter the change watcher attaches to its NETLINK_NETFILTER
 * socket. The kernel runs it as it queues each notification datagram on
 * that socket (netlink_broadcast, in the committing process's context), so
 * it sees the datagram when the commit sends it, however late the agent's
 * thread gets to read it. It records the kernel time (CLOCK_MONOTONIC,
 * bpf_ktime_get_ns) under the datagram's first message's sequence number and
 * sender port id, keeping the first such datagram's time; the watcher looks
 * the key up (and deletes it) for the first datagram of each transaction and
 * dates the transaction by it. It keeps every datagram whole and changes
 * nothing: it only reads the netlink header.
 */

#include "types.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

struct __sk_buff;

/* nlmsg_seq and nlmsg_pid: bytes 8-15 of struct nlmsghdr. */
struct stamp_key {
	__u32 seq;
	__u32 portid;
};

/* A large kube-proxy sync is ~1,000 datagrams queued at once: the LRU holds
 * many syncs' worth, so a transaction's first datagram is still there when
 * the watcher reads it. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct stamp_key);
	__type(value, __u64);
} stamps SEC(".maps");

SEC("socket")
int stamp_datagram(struct __sk_buff *skb)
{
	struct stamp_key k;
	if (bpf_skb_load_bytes(skb, 8, &k, sizeof(k)) == 0) {
		__u64 now = bpf_ktime_get_ns();
		bpf_map_update_elem(&stamps, &k, &now, BPF_NOEXIST);
	}
	return -1; /* keep the whole datagram */
}
