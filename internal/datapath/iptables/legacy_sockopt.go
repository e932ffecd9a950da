//go:build linux

package iptables

// The fetch half of the in-process iptables-legacy reader: the two
// getsockopt calls iptables-save itself makes through libiptc, on a raw
// socket created inside the target network namespace. Reads only:
// IPT_SO_GET_INFO / IPT_SO_GET_ENTRIES (and the IP6T_ twins), never a
// SET_* option (which would replace a table).

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nsutil"
)

// Socket options (linux/netfilter_ipv4/ip_tables.h, netfilter_ipv6/ip6_tables.h).
const (
	iptSoGetInfo    = 64 // IPT_BASE_CTL; IP6T_SO_GET_INFO has the same number on SOL_IPV6
	iptSoGetEntries = 65
	getinfoSize     = 84 // struct ipt_getinfo / ip6t_getinfo
	getEntriesHdr   = 40 // struct ipt_get_entries up to entrytable (aligned for the u64 counters)
)

// legacySocket opens the raw socket the getsockopts need, in the namespace.
func legacySocket(netns string, v6 bool) (int, error) {
	domain := unix.AF_INET
	if v6 {
		domain = unix.AF_INET6
	}
	fd, err := nsutil.Socket(netns, domain, unix.SOCK_RAW, unix.IPPROTO_RAW)
	if err != nil {
		return -1, fmt.Errorf("%w: raw socket for iptables-legacy: %v", model.ErrUnsupported, err)
	}
	return fd, nil
}

func sockLevel(v6 bool) int {
	if v6 {
		return unix.SOL_IPV6
	}
	return unix.SOL_IP
}

func getsockopt(fd, level, opt int, buf []byte) (int, error) {
	n := uint32(len(buf))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt),
		uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
	if e != 0 {
		return int(n), e
	}
	return int(n), nil
}

// errTableChanged: the table was replaced between GET_INFO and GET_ENTRIES.
var errTableChanged = errors.New("table replaced during the read")

// getInfo asks for a table's header (IPT_SO_GET_INFO).
func getInfo(fd int, v6 bool, table string) (tableInfo, error) {
	buf := make([]byte, getinfoSize)
	copy(buf, table)
	if _, err := getsockopt(fd, sockLevel(v6), iptSoGetInfo, buf); err != nil {
		return tableInfo{}, fmt.Errorf("getsockopt GET_INFO %s: %w", table, err)
	}
	return parseInfo(buf)
}

// getEntries copies the table's entries (IPT_SO_GET_ENTRIES) into buf
// (replaced by a larger mapping as needed; returned, the caller unmaps it
// with unmapEntries) and checks the header has not moved since.
func getEntries(fd int, v6 bool, table string, info tableInfo, buf []byte) ([]byte, error) {
	need := getEntriesHdr + int(info.size)
	if cap(buf) < need {
		unmapEntries(buf)
		var err error
		if buf, err = mapEntries(need); err != nil {
			return nil, fmt.Errorf("getsockopt GET_ENTRIES %s: a %d-byte buffer: %w", table, need, err)
		}
	}
	buf = buf[:need]
	clear(buf[:getEntriesHdr])
	copy(buf, table)
	ne.PutUint32(buf[32:], info.size)
	if _, err := getsockopt(fd, sockLevel(v6), iptSoGetEntries, buf); err != nil {
		if errors.Is(err, unix.EAGAIN) {
			return buf, errTableChanged
		}
		return buf, fmt.Errorf("getsockopt GET_ENTRIES %s: %w", table, err)
	}
	if ne.Uint32(buf[32:]) != info.size {
		return buf, errTableChanged
	}
	return buf, nil
}

// mapEntries maps an n-byte GET_ENTRIES buffer outside the Go heap. In a
// large cluster the nat table's entries are a hundred megabytes or more:
// kept in the heap between reads they would be live memory the
// collector's target grows with, and the RSS would not give them back (see
// BENCHMARKS.md, "1b. iptables-legacy read in process (getsockopt) vs
// `iptables-legacy-save`"); a mapping of its own is returned to the kernel as soon as the read has decoded
// (or hashed) it. The decoder copies what it keeps (strings), so nothing
// points into the mapping after unmapEntries. MAP_POPULATE faults the
// pages in with the mapping, not one by one during the kernel's copy.
func mapEntries(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
}

// unmapEntries returns a mapEntries buffer (nil: nothing) to the kernel.
func unmapEntries(buf []byte) {
	if cap(buf) > 0 {
		_ = unix.Munmap(buf[:cap(buf)])
	}
}
