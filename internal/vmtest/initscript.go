package vmtest

import (
	"fmt"
	"path"
	"sort"
	"strings"
)

// Markers the guest writes on its results port; parseOutput reads them.
const (
	markPrefix = "@@VMTEST "
	guestOut   = "/dev/ttyS1"
)

// initPlan is what the generated /init does.
type initPlan struct {
	KernelVersion string
	Modules       []string // paths under /lib/modules/VERSION, in load order
	Network       bool
	Binaries      []string // names under /tests, run in this order
	Args          []string // passed to every test binary after -test.v
	Env           []string // KEY=VALUE for every test binary
}

// initScript renders the guest's /init (run by busybox sh as PID 1): mount
// the pseudo filesystems (proc, sys, dev, debugfs, tracefs, bpffs, cgroup2),
// load modules in dependency order, run each test binary with its output on
// the results port, then power off.
func initScript(p initPlan) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	w("#!/bin/sh")
	w("export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TMPDIR=/tmp")
	for _, m := range [][3]string{
		{"proc", "proc", "/proc"}, {"sysfs", "sysfs", "/sys"}, {"devtmpfs", "devtmpfs", "/dev"},
		{"tmpfs", "tmpfs", "/tmp"}, {"tmpfs", "tmpfs", "/run"},
	} {
		w("mkdir -p %s && mount -t %s %s %s", m[2], m[0], m[1], m[2])
	}
	w("mkdir -p /dev/pts /dev/shm /run/netns && mount -t devpts devpts /dev/pts && mount -t tmpfs tmpfs /dev/shm")
	w("mount -t debugfs debugfs /sys/kernel/debug")
	w("mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null || true")
	w("mount -t bpf bpf /sys/fs/bpf")
	w("mount -t cgroup2 cgroup2 /sys/fs/cgroup")
	w("stty -F %s raw -echo 2>/dev/null", guestOut)
	w("out=%s", guestOut)
	w(`say() { echo "%s$*" >$out; }`, markPrefix)
	w("cd /lib/modules/%s", p.KernelVersion)
	for _, m := range p.Modules {
		w("insmod %s 2>/dev/null || say module-failed %s", m, modName(m))
	}
	w("cd /")
	w("ip link set lo up")
	if p.Network {
		w("ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 && ip route add default via 10.0.2.2 || say network-failed")
	}
	w(`say "booted $(cut -d' ' -f1 /proc/uptime)"`)
	env := append([]string{"NETDRIFT_IN_VM=1"}, p.Env...)
	sort.Strings(env)
	for _, name := range p.Binaries {
		args := append([]string{path.Join("/tests", name), "-test.v"}, p.Args...)
		w("say BEGIN %s", name)
		w("mkdir -p /work/%s && cd /work/%s", name, name)
		w("env %s %s >$out 2>&1 </dev/null", quoteAll(env), quoteAll(args))
		w("say END %s $?", name)
		w("cd /")
	}
	w(`say "DONE $(cut -d' ' -f1 /proc/uptime)"`)
	w("sync")
	w("poweroff -f")
	return b.String()
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = shellQuote(s)
	}
	return strings.Join(q, " ")
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
