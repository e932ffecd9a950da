//go:build ignore

/* netdrift RST probe.
 *
 * Counts TCP resets whose sender or destination address is "watched" (the
 * agent fills the watched map with this node's pod IPs from the moment they
 * exist until a window after their pod is deleted; trace-rsts with any
 * address), per (address, direction, state, reset reason, endpoint port,
 * time bucket), and emits rate-limited events to a ring buffer.
 *
 * States (WATCH_CLASSIFY entries): the agent writes into each entry the
 * kernel time (bpf_ktime_get_ns) of its pod's deletion request and of its
 * removal from the API once it knows them; a reset at or after them is
 * counted as terminating / deleted. Any other reset is "live" and counted in
 * a time bucket of 2^BUCKET_SHIFT ns, so that user space can settle it later
 * against a deletion request it learns of after the reset (watch delay).
 *
 * Three attachment modes share one handler:
 *  - tracepoint tcp/tcp_send_reset (kernels >= 6.10 fire it for every reset,
 *    including those sent with no socket; addresses are 28-byte sockaddrs,
 *    saddr is always the reset's sender);
 *  - the same tracepoint as a BTF tracepoint (tp_btf: no tracefs needed),
 *    reading the skb / socket arguments like the fentry programs;
 *  - fentry on tcp_v4_send_reset / tcp_v6_send_reset (replies to a received
 *    segment, read from the skb's headers) plus tcp_send_active_reset (resets
 *    a local socket sends on its own), for older kernels.
 * Exactly one mode is attached at a time, so no reset is counted twice.
 */

#include "types.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define DIR_SENT_BY 1 /* the watched address sent the reset */
#define DIR_SENT_TO 2 /* the reset was sent to the watched address */

#define REASON_NO_SOCKET 1
#define REASON_UNKNOWN 0xffff /* fallback mode on kernels without reasons */

#define STATE_NONE 0        /* unclassified (no WATCH_CLASSIFY) */
#define STATE_LIVE 1        /* before any known deletion request: bucketed */
#define STATE_TERMINATING 2 /* at/after the deletion request (term_ns) */
#define STATE_DELETED 3     /* at/after the pod left the API (gone_ns) */

#define WATCH_CLASSIFY 1 /* classify by term_ns / gone_ns, bucket live resets */

#define BUCKET_SHIFT 24 /* 16.8 ms */

#define SRC_TRACEPOINT 1
#define SRC_V4_REPLY 2
#define SRC_V6_REPLY 3
#define SRC_ACTIVE 4

enum stat_index {
	STAT_EVENTS_RATELIMITED = 0,
	STAT_EVENTS_LOST = 1,
	STAT_COUNTERS_FULL = 2,
	STAT_UNPARSED = 3,
	STAT_MAX = 4,
};

/* Events per second per CPU; 0 disables events. Set by the loader. */
volatile const __u32 events_per_sec = 100;

struct ip_key {
	__u8 addr[16]; /* IPv6, or IPv4-mapped IPv6 (::ffff:a.b.c.d) */
};

struct watch_val {
	__u32 id;   /* chosen by user space, copied into events */
	__u16 port; /* 0: any port; else only resets on this port of the watched address */
	__u16 flags;   /* WATCH_* */
	__u64 term_ns; /* ktime of the deletion request; 0: none known */
	__u64 gone_ns; /* ktime the pod left the API; 0: not known */
};

/* An endpoint port of a watched address (a Service's target port): resets on
 * it are counted with the port, others with port 0. */
struct port_key {
	__u8 addr[16];
	__u16 port;
	__u16 pad;
};

struct counter_key {
	__u8 addr[16];
	__u8 dir;
	__u8 state;
	__u16 reason;
	__u16 port; /* the watched side's endpoint port, 0 when not one */
	__u16 pad;
	__u64 bucket; /* STATE_LIVE: ktime >> BUCKET_SHIFT; else 0 */
};

struct rst_event {
	__u64 ktime_ns;
	__u8 sender[16];
	__u8 peer[16];
	__u16 sender_port; /* host byte order */
	__u16 peer_port;
	__u16 reason;
	__u8 dir; /* DIR_SENT_BY | DIR_SENT_TO */
	__u8 source;
	__u32 watched_id;
	__u32 pad;
};

/* Referenced only so that the type is in BTF for bpf2go's -type. */
const struct rst_event *unused_rst_event __attribute__((unused));

struct ratelimit {
	__u64 window_ns;
	__u32 count;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct ip_key);
	__type(value, struct watch_val);
} watched SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct port_key);
	__type(value, __u8);
} endpoint_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct counter_key);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ratelimit);
} ratelimits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

struct rst_info {
	__u8 sender[16];
	__u8 peer[16];
	__u16 sender_port;
	__u16 peer_port;
	__u16 reason;
	__u8 source;
};

static __always_inline void stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);
	if (v)
		*v += 1;
}

static __always_inline void v4mapped(__u8 *out, __be32 a)
{
	__builtin_memset(out, 0, 10);
	out[10] = 0xff;
	out[11] = 0xff;
	__builtin_memcpy(out + 12, &a, 4);
}

static __always_inline void bump(const __u8 *addr, __u16 port, const struct watch_val *w,
				 __u8 dir, __u16 reason, __u64 now)
{
	struct counter_key k = {};
	__u64 one = 1, *v;

	__builtin_memcpy(k.addr, addr, 16);
	k.dir = dir;
	k.reason = reason;
	if (w->flags & WATCH_CLASSIFY) {
		struct port_key pk = {};

		if (w->gone_ns && now >= w->gone_ns)
			k.state = STATE_DELETED;
		else if (w->term_ns && now >= w->term_ns)
			k.state = STATE_TERMINATING;
		else {
			k.state = STATE_LIVE;
			k.bucket = now >> BUCKET_SHIFT;
		}
		__builtin_memcpy(pk.addr, addr, 16);
		pk.port = port;
		if (bpf_map_lookup_elem(&endpoint_ports, &pk))
			k.port = port;
	}
	v = bpf_map_lookup_elem(&counters, &k);
	if (v) {
		*v += 1;
		return;
	}
	if (bpf_map_update_elem(&counters, &k, &one, BPF_NOEXIST) == 0)
		return;
	/* Another CPU created the entry meanwhile, or the map is full. */
	v = bpf_map_lookup_elem(&counters, &k);
	if (v) {
		*v += 1;
		return;
	}
	stat_inc(STAT_COUNTERS_FULL);
}

static __always_inline int allow_event(void)
{
	__u32 zero = 0;
	struct ratelimit *rl;
	__u64 now;

	if (events_per_sec == 0)
		return 0;
	rl = bpf_map_lookup_elem(&ratelimits, &zero);
	if (!rl)
		return 0;
	now = bpf_ktime_get_ns();
	if (now - rl->window_ns >= 1000000000ULL) {
		rl->window_ns = now;
		rl->count = 0;
	}
	if (rl->count >= events_per_sec) {
		stat_inc(STAT_EVENTS_RATELIMITED);
		return 0;
	}
	rl->count++;
	return 1;
}

/* Copies the watch entry of addr into *w; 1 when watched (and port matches).
 * A copy and an int, not a pointer: the compiler may otherwise OR two entry
 * pointers to test them, which the verifier refuses. */
static __always_inline int match(const __u8 *addr, __u16 port, struct watch_val *w)
{
	struct ip_key k;
	const struct watch_val *v;

	__builtin_memcpy(k.addr, addr, 16);
	v = bpf_map_lookup_elem(&watched, &k);
	if (!v || (v->port != 0 && v->port != port))
		return 0;
	*w = *v;
	return 1;
}

static __always_inline int handle(const struct rst_info *ri)
{
	struct watch_val by = {}, to = {};
	struct rst_event *ev;
	__u8 dir = 0;
	__u64 now;

	if (match(ri->sender, ri->sender_port, &by))
		dir |= DIR_SENT_BY;
	if (match(ri->peer, ri->peer_port, &to))
		dir |= DIR_SENT_TO;
	if (!dir)
		return 0;
	now = bpf_ktime_get_ns();
	if (dir & DIR_SENT_BY)
		bump(ri->sender, ri->sender_port, &by, DIR_SENT_BY, ri->reason, now);
	if (dir & DIR_SENT_TO)
		bump(ri->peer, ri->peer_port, &to, DIR_SENT_TO, ri->reason, now);
	if (!allow_event())
		return 0;
	ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		stat_inc(STAT_EVENTS_LOST);
		return 0;
	}
	ev->ktime_ns = now;
	__builtin_memcpy(ev->sender, ri->sender, 16);
	__builtin_memcpy(ev->peer, ri->peer, 16);
	ev->sender_port = ri->sender_port;
	ev->peer_port = ri->peer_port;
	ev->reason = ri->reason;
	ev->dir = dir;
	ev->source = ri->source;
	ev->watched_id = (dir & DIR_SENT_BY) ? by.id : to.id;
	ev->pad = 0;
	bpf_ringbuf_submit(ev, 0);
	return 0;
}

/* ---- tracepoint mode ---------------------------------------------------- */

/* Layout of /sys/kernel/tracing/events/tcp/tcp_send_reset/format since 6.10;
 * the loader checks the running kernel's format before attaching. */
struct tp_send_reset {
	__u64 common;
	const void *skbaddr;
	const void *skaddr;
	__s32 state;
	__u32 reason;
	__u8 saddr[28];
	__u8 daddr[28];
};

/* sockaddr_in / sockaddr_in6 as the tracepoint stores them. */
static __always_inline int parse_sockaddr(const __u8 *sa, __u8 *out, __u16 *port)
{
	__u16 family = sa[0] | (sa[1] << 8); /* host (little-endian) order */

	*port = (sa[2] << 8) | sa[3];
	if (family == AF_INET) {
		__builtin_memset(out, 0, 10);
		out[10] = 0xff;
		out[11] = 0xff;
		__builtin_memcpy(out + 12, sa + 4, 4);
		return 1;
	}
	if (family == AF_INET6) {
		__builtin_memcpy(out, sa + 8, 16);
		return 1;
	}
	return 0;
}

SEC("tracepoint/tcp/tcp_send_reset")
int tp_send_reset(struct tp_send_reset *ctx)
{
	struct rst_info ri = {};
	__u8 sa[28], da[28];

	if (bpf_probe_read_kernel(sa, sizeof(sa), ctx->saddr) ||
	    bpf_probe_read_kernel(da, sizeof(da), ctx->daddr)) {
		stat_inc(STAT_UNPARSED);
		return 0;
	}
	if (!parse_sockaddr(sa, ri.sender, &ri.sender_port) ||
	    !parse_sockaddr(da, ri.peer, &ri.peer_port)) {
		stat_inc(STAT_UNPARSED);
		return 0;
	}
	ri.reason = ctx->reason;
	ri.source = SRC_TRACEPOINT;
	return handle(&ri);
}

/* ---- fentry mode ---------------------------------------------------------- */

static __always_inline __u16 reason_arg(void *ctx, int has_sock)
{
	__u64 r = 0;

	/* The reason argument exists since 6.10; before, infer what we can. */
	if (bpf_get_func_arg_cnt(ctx) >= 3 && bpf_get_func_arg(ctx, 2, &r) == 0)
		return (__u16)r;
	return has_sock ? REASON_UNKNOWN : REASON_NO_SOCKET;
}

/* A reply reset: the sender is the received segment's destination.
 * v6 < 0: tell the family from the IP header's version nibble.
 * Returns 1 when ri is filled, 0 to ignore the segment, -1 when unreadable. */
static __always_inline int skb_info(struct rst_info *ri, const struct sk_buff *skb, int v6)
{
	unsigned char *head = BPF_CORE_READ(skb, head);
	__u16 nh = BPF_CORE_READ(skb, network_header);
	__u16 th = BPF_CORE_READ(skb, transport_header);
	__u8 tcp[14];

	if (bpf_probe_read_kernel(tcp, sizeof(tcp), head + th))
		return -1;
	if (tcp[13] & 0x04) /* never a reset in reply to a reset */
		return 0;
	ri->peer_port = (tcp[0] << 8) | tcp[1];
	ri->sender_port = (tcp[2] << 8) | tcp[3];
	if (v6 < 0) {
		__u8 ver;
		if (bpf_probe_read_kernel(&ver, 1, head + nh))
			return -1;
		v6 = (ver >> 4) == 6;
	}
	if (v6) {
		__u8 ip6[40];
		if (bpf_probe_read_kernel(ip6, sizeof(ip6), head + nh))
			return -1;
		__builtin_memcpy(ri->peer, ip6 + 8, 16);
		__builtin_memcpy(ri->sender, ip6 + 24, 16);
		ri->source = SRC_V6_REPLY;
	} else {
		__be32 ip4[5];
		if (bpf_probe_read_kernel(ip4, sizeof(ip4), head + nh))
			return -1;
		v4mapped(ri->peer, ip4[3]);
		v4mapped(ri->sender, ip4[4]);
		ri->source = SRC_V4_REPLY;
	}
	return 1;
}

/* An active reset (abort, close with unread data, ...): the socket's own
 * addresses. Returns 1 when ri is filled, -1 for another family. */
static __always_inline int sock_info(struct rst_info *ri, const struct sock *sk)
{
	unsigned short family = BPF_CORE_READ(sk, __sk_common.skc_family);
	__u16 dport;

	if (family == AF_INET) {
		v4mapped(ri->sender, BPF_CORE_READ(sk, __sk_common.skc_rcv_saddr));
		v4mapped(ri->peer, BPF_CORE_READ(sk, __sk_common.skc_daddr));
	} else if (family == AF_INET6) {
		BPF_CORE_READ_INTO(&ri->sender, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8);
		BPF_CORE_READ_INTO(&ri->peer, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr8);
	} else {
		return -1;
	}
	ri->sender_port = BPF_CORE_READ(sk, __sk_common.skc_num);
	dport = BPF_CORE_READ(sk, __sk_common.skc_dport); /* network order */
	ri->peer_port = (__u16)((dport >> 8) | (dport << 8));
	ri->source = SRC_ACTIVE;
	return 1;
}

static __always_inline int finish(struct rst_info *ri, int ok, __u16 reason)
{
	if (ok < 0) {
		stat_inc(STAT_UNPARSED);
		return 0;
	}
	if (ok == 0)
		return 0;
	ri->reason = reason;
	return handle(ri);
}

static __always_inline int from_skb(void *ctx, const struct sock *sk, struct sk_buff *skb, int v6)
{
	struct rst_info ri = {};
	int ok = skb_info(&ri, skb, v6);

	return finish(&ri, ok, reason_arg(ctx, sk != 0));
}

SEC("fentry/tcp_v4_send_reset")
int BPF_PROG(fentry_v4_send_reset, const struct sock *sk, struct sk_buff *skb)
{
	return from_skb(ctx, sk, skb, 0);
}

SEC("fentry/tcp_v6_send_reset")
int BPF_PROG(fentry_v6_send_reset, const struct sock *sk, struct sk_buff *skb)
{
	return from_skb(ctx, sk, skb, 1);
}

SEC("fentry/tcp_send_active_reset")
int BPF_PROG(fentry_active_reset, struct sock *sk)
{
	struct rst_info ri = {};
	int ok = sock_info(&ri, sk);

	return finish(&ri, ok, reason_arg(ctx, 1));
}

/* ---- BTF tracepoint mode (tp_btf, kernels >= 6.10) -------------------------
 * The same tracepoint as tracepoint mode, attached without tracefs; the
 * arguments are (sk, skb, reason): the skb (the segment being answered) when
 * there is one, else the socket (an active reset). */
SEC("tp_btf/tcp_send_reset")
int BPF_PROG(btf_send_reset, const struct sock *sk, const struct sk_buff *skb, int reason)
{
	struct rst_info ri = {};
	int ok = -1;

	if (skb)
		ok = skb_info(&ri, skb, -1);
	else if (sk)
		ok = sock_info(&ri, sk);
	return finish(&ri, ok, (__u16)reason);
}
