//go:build ignore

/* Minimal kernel type definitions for the RST probe, written for netdrift.
 * Only the fields the probe reads are declared; preserve_access_index makes
 * every access a CO-RE relocation resolved against the running kernel's BTF,
 * so layouts may differ between kernels. The tracepoint path uses none of
 * these and works without kernel BTF. */
#ifndef NETDRIFT_TYPES_H
#define NETDRIFT_TYPES_H

typedef unsigned char __u8;
typedef signed char __s8;
typedef unsigned short __u16;
typedef short __s16;
typedef unsigned int __u32;
typedef int __s32;
typedef unsigned long long __u64;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;

/* UAPI constants (stable ABI values, include/uapi/linux/bpf.h). */
enum {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_HASH = 5,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_RINGBUF = 27,
};
enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
};

#define AF_INET 2
#define AF_INET6 10

struct in6_addr {
	union {
		__u8 u6_addr8[16];
	} in6_u;
} __attribute__((preserve_access_index));

struct sock_common {
	__be32 skc_daddr;
	__be32 skc_rcv_saddr;
	__be16 skc_dport;
	__u16 skc_num;
	unsigned short skc_family;
	struct in6_addr skc_v6_daddr;
	struct in6_addr skc_v6_rcv_saddr;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
} __attribute__((preserve_access_index));

struct sk_buff {
	unsigned char *head;
	__u16 transport_header;
	__u16 network_header;
} __attribute__((preserve_access_index));

#endif
