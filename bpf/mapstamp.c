//go:build ignore

/* netdrift map-write stamp.
 *
 * Records, for each watched BPF map, the kernel time (CLOCK_MONOTONIC,
 * bpf_ktime_get_ns) of its last successful write from user space and how
 * many writes it has had. The Cilium reader (internal/datapath/cilium)
 * watches Cilium's load-balancer maps this way: it has no change feed, and
 * the stamp dates the state a read finds by the write that made it instead
 * of by the read. User space puts the kernel ids of the maps to watch into
 * `watched`, each with a zero value.
 *
 * Two sets of programs; user space loads one:
 *
 * fexit, preferred: programs after the hash map's own update and delete
 * functions (htab_map_update_elem, htab_map_delete_elem; Cilium's
 * load-balancer maps are plain hash maps). The bpf() commands call them,
 * the batch ones once per element; so do BPF programs' helper calls on
 * plain hash maps, which pay one map lookup each (Cilium's per-packet
 * writes go to LRU and per-CPU maps, which have functions of their own).
 * The static functions of the bpf() system call itself cannot be traced
 * on every kernel.
 *
 * tp_btf, where fexit is refused (kernels without ftrace direct calls):
 * programs on the raw system-call tracepoints. On entry of a bpf() write
 * command (update, delete, lookup-and-delete, and their batch forms) the
 * entry program resolves the command's map file descriptor through the
 * task's file table and, when the map is watched, notes it for the thread;
 * the exit program stamps the map when the command succeeded (a batch that
 * failed part way is stamped: it may have written). Every system call of
 * the node passes through them (returning at the first comparison): a cost
 * per system call. Their arguments are read from the saved registers,
 * whose layout is per architecture: x86-64 and arm64 are known (CO-RE
 * picks the one the running kernel has); on others nothing is stamped,
 * which user space's self-test on attaching finds.
 *
 * Either way a stamp is taken after the kernel wrote, before the caller
 * returns.
 */

#include "types.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define MAX_WATCHED 16

/* Only the fields read are declared; preserve_access_index makes each
 * access a CO-RE relocation against the running kernel's BTF. */
struct bpf_map {
	__u32 id;
} __attribute__((preserve_access_index));

struct file {
	void *private_data;
} __attribute__((preserve_access_index));

struct fdtable {
	unsigned int max_fds;
	struct file **fd;
} __attribute__((preserve_access_index));

struct files_struct {
	struct fdtable *fdt;
} __attribute__((preserve_access_index));

struct task_struct {
	struct files_struct *files;
} __attribute__((preserve_access_index));

/* The saved registers of a system call, as the two known architectures
 * name them (CO-RE flavours of the kernel's struct pt_regs). */
struct pt_regs___x86 {
	unsigned long di; /* first argument */
	unsigned long si; /* second */
} __attribute__((preserve_access_index));

struct pt_regs___arm64 {
	__u64 regs[31]; /* regs[0], regs[1]: first and second argument */
} __attribute__((preserve_access_index));

struct pt_regs;

/* The bpf() system call's number on this architecture (set by user space;
 * 0 stamps nothing). */
const volatile __u32 nr_bpf = 0;

/* Noted commands not yet seen returning (approximate: only a hint that
 * lets the exit program skip its lookup). */
__u32 in_flight_hint = 0;

/* bpf() commands (include/uapi/linux/bpf.h) and where their attributes
 * hold the map's file descriptor. */
#define BPF_MAP_UPDATE_ELEM 2
#define BPF_MAP_DELETE_ELEM 3
#define BPF_MAP_LOOKUP_AND_DELETE_ELEM 21
#define BPF_MAP_LOOKUP_AND_DELETE_BATCH 25
#define BPF_MAP_UPDATE_BATCH 26
#define BPF_MAP_DELETE_BATCH 27
#define ELEM_MAP_FD_OFF 0   /* attr.map_fd */
#define BATCH_MAP_FD_OFF 36 /* attr.batch.map_fd */

/* One watched map's writes. */
struct map_stamp {
	__u64 ns;     /* bpf_ktime_get_ns of the last write; 0 before the first */
	__u64 writes; /* successful write commands seen (a batch counts once) */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_WATCHED);
	__type(key, __u32); /* map id */
	__type(value, struct map_stamp);
} watched SEC(".maps");

/* A write command in flight on a watched map, by thread. */
struct in_flight {
	__u32 id;
	__u32 batch;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64); /* pid_tgid */
	__type(value, struct in_flight);
} inflight SEC(".maps");

/* The map behind file descriptor fd of the current task, or NULL. */
static __always_inline struct bpf_map *map_of_fd(__u32 fd)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	struct file **fds;
	struct file *f = 0;
	if (!fdt || fd >= BPF_CORE_READ(fdt, max_fds))
		return 0;
	fds = BPF_CORE_READ(fdt, fd);
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]) != 0 || !f)
		return 0;
	return (struct bpf_map *)BPF_CORE_READ(f, private_data);
}

static __always_inline void stamp(__u32 id)
{
	struct map_stamp *s = bpf_map_lookup_elem(&watched, &id);
	if (!s)
		return;
	s->ns = bpf_ktime_get_ns();
	__sync_fetch_and_add(&s->writes, 1);
}

/* The hash map's own update and delete: BPF_MAP_UPDATE_ELEM and
 * BPF_MAP_DELETE_ELEM on a hash map call them, and the batch commands once
 * per element. The return value is read as int: 0 or -errno either way. */
SEC("fexit/htab_map_update_elem")
int BPF_PROG(fexit_update, struct bpf_map *map, void *key, void *value, __u64 flags, int ret)
{
	if (ret == 0)
		stamp(BPF_CORE_READ(map, id));
	return 0;
}

SEC("fexit/htab_map_delete_elem")
int BPF_PROG(fexit_delete, struct bpf_map *map, void *key, int ret)
{
	if (ret == 0)
		stamp(BPF_CORE_READ(map, id));
	return 0;
}

/* The first two arguments of the system call whose registers are regs;
 * false on an architecture not known here. */
static __always_inline int syscall_args(struct pt_regs *regs, __u64 *a0, __u64 *a1)
{
	if (bpf_core_field_exists(((struct pt_regs___x86 *)0)->di)) {
		struct pt_regs___x86 *r = (void *)regs;
		*a0 = BPF_CORE_READ(r, di);
		*a1 = BPF_CORE_READ(r, si);
		return 1;
	}
	if (bpf_core_field_exists(((struct pt_regs___arm64 *)0)->regs)) {
		struct pt_regs___arm64 *r = (void *)regs;
		*a0 = BPF_CORE_READ(r, regs[0]);
		*a1 = BPF_CORE_READ(r, regs[1]);
		return 1;
	}
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(tp_enter, struct pt_regs *regs, long id)
{
	struct in_flight fl = {};
	__u64 cmd, uattr;
	__u32 off = ELEM_MAP_FD_OFF, fd;
	struct bpf_map *map;
	if (id != nr_bpf || nr_bpf == 0 || !syscall_args(regs, &cmd, &uattr))
		return 0;
	switch (cmd) {
	case BPF_MAP_UPDATE_ELEM:
	case BPF_MAP_DELETE_ELEM:
	case BPF_MAP_LOOKUP_AND_DELETE_ELEM:
		break;
	case BPF_MAP_LOOKUP_AND_DELETE_BATCH:
	case BPF_MAP_UPDATE_BATCH:
	case BPF_MAP_DELETE_BATCH:
		off = BATCH_MAP_FD_OFF;
		fl.batch = 1;
		break;
	default:
		return 0;
	}
	if (bpf_probe_read_user(&fd, sizeof(fd), (void *)(uattr + off)) != 0)
		return 0;
	map = map_of_fd(fd);
	if (!map)
		return 0;
	fl.id = BPF_CORE_READ(map, id);
	if (!bpf_map_lookup_elem(&watched, &fl.id))
		return 0;
	__u64 tid = bpf_get_current_pid_tgid();
	if (bpf_map_update_elem(&inflight, &tid, &fl, BPF_ANY) == 0)
		__sync_fetch_and_add(&in_flight_hint, 1);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(tp_exit, struct pt_regs *regs, long ret)
{
	if (in_flight_hint == 0)
		return 0;
	__u64 tid = bpf_get_current_pid_tgid();
	struct in_flight *fl = bpf_map_lookup_elem(&inflight, &tid);
	if (!fl)
		return 0;
	if (ret == 0 || fl->batch)
		stamp(fl->id);
	if (bpf_map_delete_elem(&inflight, &tid) == 0)
		__sync_fetch_and_add(&in_flight_hint, -1);
	return 0;
}
