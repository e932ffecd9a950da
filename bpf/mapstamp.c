//go:build ignore

/* netdrift map-write stamp.
 *
 * Programs on the bpf() system call's tracepoints that record, for each
 * watched map, the kernel time (CLOCK_MONOTONIC, bpf_ktime_get_ns) of its
 * last successful write and how many writes it has had. The Cilium reader
 * (internal/datapath/cilium) watches Cilium's load-balancer maps this way:
 * it has no change feed, and the stamp dates the state a read finds by the
 * write that made it instead of by the read.
 *
 * User space puts the kernel ids of the maps to watch into `watched`, each
 * with a zero value. On entry of a map write command (update, delete,
 * lookup-and-delete, and their batch forms) the entry program resolves the
 * command's map file descriptor through the calling task's file table to
 * the map's id and, when the map is watched, notes it for the thread; the
 * exit program stamps the map when the command succeeded (a batch may have
 * written entries before failing: stamped either way). The stamp is taken
 * after the kernel wrote, before the caller returns. Writes by BPF
 * programs (helpers) make no system call: the datapath's per-packet map
 * updates never run this code, and other bpf() commands return at the
 * first comparison.
 */

#include "types.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

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

/* The tracepoints' records (tracefs events/syscalls/sys_{enter,exit}_bpf/format). */
struct sys_enter_bpf_args {
	__u64 common;
	__s32 nr;
	__u32 pad;
	__u64 cmd;
	__u64 uattr;
	__u64 size;
};

struct sys_exit_bpf_args {
	__u64 common;
	__s32 nr;
	__u32 pad;
	__s64 ret;
};

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

SEC("tracepoint/syscalls/sys_enter_bpf")
int stamp_enter(struct sys_enter_bpf_args *ctx)
{
	struct in_flight fl = {};
	__u32 off = ELEM_MAP_FD_OFF, fd;
	struct bpf_map *map;
	switch (ctx->cmd) {
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
	if (bpf_probe_read_user(&fd, sizeof(fd), (void *)(ctx->uattr + off)) != 0)
		return 0;
	map = map_of_fd(fd);
	if (!map)
		return 0;
	fl.id = BPF_CORE_READ(map, id);
	if (!bpf_map_lookup_elem(&watched, &fl.id))
		return 0;
	__u64 tid = bpf_get_current_pid_tgid();
	bpf_map_update_elem(&inflight, &tid, &fl, BPF_ANY);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_bpf")
int stamp_exit(struct sys_exit_bpf_args *ctx)
{
	__u64 tid = bpf_get_current_pid_tgid();
	struct in_flight *fl = bpf_map_lookup_elem(&inflight, &tid);
	if (!fl)
		return 0;
	struct map_stamp *s = bpf_map_lookup_elem(&watched, &fl->id);
	if (s && (ctx->ret == 0 || fl->batch)) {
		s->ns = bpf_ktime_get_ns();
		__sync_fetch_and_add(&s->writes, 1);
	}
	bpf_map_delete_elem(&inflight, &tid);
	return 0;
}
