//go:build ignore

/* netdrift nf_tables commit stamp.
 *
 * A socket filter the change watcher attaches to its NETLINK_NETFILTER
 * socket (group NFNLGRP_NFTABLES). The kernel runs it as it queues each
 * notification datagram on that socket (netlink_broadcast, in the
 * committing process's context), so it sees a commit's datagrams when the
 * commit sends them, however late the agent's thread gets to read them.
 *
 * Commits are serialized per network namespace, and each ends with a NEWGEN
 * message in a datagram of its own carrying the new generation id. So the
 * first datagram after a NEWGEN of generation G opens the commit that will
 * end with NEWGEN G+1: the filter records the kernel time of that datagram
 * (CLOCK_MONOTONIC, bpf_ktime_get_ns) in a ring slot tagged with G+1. The
 * watcher, handling NEWGEN G+1, takes the slot and checks the tag. The
 * agent seeds the last generation when it attaches the filter (state).
 *
 * It keeps every datagram whole and changes nothing: it reads the netlink
 * header and, of a NEWGEN, the generation attribute.
 */

#include "types.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

struct __sk_buff;

#define NFT_MSG_NEWGEN_TYPE ((10 << 8) | 15) /* NFNL_SUBSYS_NFTABLES, NFT_MSG_NEWGEN */
#define NFTA_GEN_ID 1
#define NLA_TYPE_MASK 0x3fff
#define STAMP_SLOTS 64

/* The filter's state: the last generation a NEWGEN announced, and whether
 * the commit after it has sent its first datagram yet. */
struct stamp_state {
	__u32 last_gen;
	__u32 open;
};

/* When the commit of generation gen sent its first datagram. */
struct gen_stamp {
	__u32 gen;
	__u32 pad;
	__u64 ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stamp_state);
} state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, STAMP_SLOTS);
	__type(key, __u32);
	__type(value, struct gen_stamp);
} stamps SEC(".maps");

/* nlmsghdr: len u32, type u16 at 4; nfgenmsg at 16 (4 bytes); a NEWGEN's
 * first attribute at 20: nla_len u16, nla_type u16 at 22, value at 24. */
static __always_inline void saw_newgen(struct __sk_buff *skb, struct stamp_state *st)
{
	__u16 atype;
	__be32 gen;
	st->open = 0;
	if (bpf_skb_load_bytes(skb, 22, &atype, sizeof(atype)) == 0 && (atype & NLA_TYPE_MASK) == NFTA_GEN_ID &&
	    bpf_skb_load_bytes(skb, 24, &gen, sizeof(gen)) == 0)
		st->last_gen = bpf_ntohl(gen);
}

SEC("socket")
int stamp_datagram(struct __sk_buff *skb)
{
	__u32 zero = 0;
	__u16 type;
	struct stamp_state *st = bpf_map_lookup_elem(&state, &zero);
	if (!st || bpf_skb_load_bytes(skb, 4, &type, sizeof(type)) != 0)
		return -1;
	if (type == NFT_MSG_NEWGEN_TYPE) {
		saw_newgen(skb, st);
		return -1;
	}
	if (st->open)
		return -1;
	st->open = 1;
	__u32 next = st->last_gen + 1;
	__u32 slot = next % STAMP_SLOTS;
	struct gen_stamp *s = bpf_map_lookup_elem(&stamps, &slot);
	if (s) {
		s->gen = next;
		s->ns = bpf_ktime_get_ns();
	}
	return -1; /* keep the whole datagram */
}
