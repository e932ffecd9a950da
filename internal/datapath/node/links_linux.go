package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

type nsIdentity struct{ dev, ino uint64 }

// nsCandidates lists paths of network namespaces that may hold veth peers:
// named ones first, then those of running processes.
func nsCandidates(cfg Config) []string {
	dirs := cfg.NetnsDirs
	if dirs == nil {
		dirs = []string{"/run/netns", "/var/run/netns"}
	}
	var out []string
	for _, d := range dirs {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			out = append(out, filepath.Join(d, e.Name()))
		}
	}
	proc := cfg.ProcPath
	if proc == "" {
		proc = "/proc"
	}
	ents, _ := os.ReadDir(proc)
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, filepath.Join(proc, e.Name(), "ns", "net"))
		}
	}
	return out
}

// resolvePeers fills PeerAddrs of veth links by finding the namespace each
// peer lives in (its netns id as the node's namespace knows it) and listing
// its addresses there. Namespaces that cannot be found leave the link
// unresolved; problems are returned as warnings.
func resolvePeers(h *netlink.Handle, self netns.NsHandle, cfg Config, links []model.Link) []string {
	want := map[int][]int{} // nsid -> link positions
	for i, l := range links {
		if (l.Kind == "veth" || l.Kind == "netkit") && l.PeerNetnsID >= 0 {
			want[l.PeerNetnsID] = append(want[l.PeerNetnsID], i)
		}
	}
	if len(want) == 0 {
		return nil
	}
	seen := map[nsIdentity]bool{}
	if id, err := nsIdentityOf(int(self)); err == nil {
		seen[id] = true
	}
	var warns []string
	for _, path := range nsCandidates(cfg) {
		if len(want) == 0 {
			break
		}
		nsid, addrs, err := peerNamespace(h, path, seen, want)
		if err != nil {
			warns = append(warns, err.Error())
		}
		if nsid < 0 {
			continue
		}
		for _, i := range want[nsid] {
			links[i].PeerResolved = true
			links[i].PeerAddrs = peerAddrs(addrs, links[i].PeerIndex)
		}
		delete(want, nsid)
	}
	return warns
}

// peerNamespace opens one candidate namespace and, if it is one of the
// wanted peers (and not seen before), returns its nsid and addresses.
func peerNamespace(h *netlink.Handle, path string, seen map[nsIdentity]bool, want map[int][]int) (int, []netlink.Addr, error) {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return -1, nil, nil // processes come and go
	}
	defer ns.Close()
	id, err := nsIdentityOf(int(ns))
	if err != nil || seen[id] {
		return -1, nil, nil
	}
	seen[id] = true
	nsid, err := h.GetNetNsIdByFd(int(ns))
	if err != nil || nsid < 0 || want[nsid] == nil {
		return -1, nil, nil
	}
	ph, err := netlink.NewHandleAt(ns)
	if err != nil {
		return -1, nil, fmt.Errorf("peer netns %s: %w", path, err)
	}
	defer ph.Close()
	addrs, err := ph.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return -1, nil, fmt.Errorf("peer netns %s: list addresses: %w", path, err)
	}
	return nsid, addrs, nil
}

func nsIdentityOf(fd int) (nsIdentity, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nsIdentity{}, err
	}
	return nsIdentity{uint64(st.Dev), st.Ino}, nil
}
