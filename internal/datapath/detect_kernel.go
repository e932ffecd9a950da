package datapath

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/google/nftables"
	mobyipvs "github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// withNFTConn opens an nf_tables netlink connection in the namespace.
func withNFTConn(ns string, fn func(*nftables.Conn) error) error {
	return withNetNSFd(ns, func(fd int) error {
		opts := []nftables.ConnOption{nftables.AsLasting()}
		if fd != 0 {
			opts = append(opts, nftables.WithNetNSFd(fd))
		}
		conn, err := nftables.New(opts...)
		if err != nil {
			return nftDialError(err)
		}
		defer conn.CloseLasting()
		return fn(conn)
	})
}

// probeNFTTables reports the kube-proxy nftables tables and how many
// service-ips elements they hold.
func probeNFTTables(ns string) (string, int, error) {
	var found []string
	services := 0
	err := withNFTConn(ns, func(conn *nftables.Conn) error {
		for _, tf := range []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6} {
			tables, err := conn.ListTablesOfFamily(tf)
			if err != nil {
				return fmt.Errorf("list nftables tables: %w", err)
			}
			for _, t := range tables {
				if t.Name != nftTableName {
					continue
				}
				label := "ip kube-proxy"
				if tf == nftables.TableFamilyIPv6 {
					label = "ip6 kube-proxy"
				}
				found = append(found, label)
				els, err := conn.GetSetElements(&nftables.Set{Table: t, Name: nftMapServiceIPs})
				if err != nil && !nftIsNotFound(err) {
					return fmt.Errorf("%s map %s: %w", label, nftMapServiceIPs, err)
				}
				services += len(els)
			}
		}
		return nil
	})
	if err != nil || len(found) == 0 {
		return "", 0, err
	}
	return fmt.Sprintf("nftables table %s (%d service-ips elements)", joinAnd(found), services), services, nil
}

// nftIPTablesKubeServices lists the families ("ip", "ip6") whose
// iptables-nft nat table has a KUBE-SERVICES chain.
func nftIPTablesKubeServices(ns string) ([]string, error) {
	var found []string
	err := withNFTConn(ns, func(conn *nftables.Conn) error {
		for _, t := range []*nftables.Table{
			{Name: "nat", Family: nftables.TableFamilyIPv4},
			{Name: "nat", Family: nftables.TableFamilyIPv6},
		} {
			_, err := conn.ListChain(t, "KUBE-SERVICES")
			if nftIsNotFound(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf("iptables-nft nat table: %w", err)
			}
			if t.Family == nftables.TableFamilyIPv6 {
				found = append(found, "ip6")
			} else {
				found = append(found, "ip")
			}
		}
		return nil
	})
	return found, err
}

func joinAnd(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " and "
		}
		out += x
	}
	return out
}

// linkExistsInNetns reports whether a link exists, over rtnetlink.
func linkExistsInNetns(ns, name string) (bool, error) {
	h := netns.None()
	if ns != "" {
		var err error
		if h, err = netns.GetFromPath(netnsPath(ns)); err != nil {
			return false, fmt.Errorf("network namespace %q: %w", ns, err)
		}
		defer h.Close()
	}
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		return false, fmt.Errorf("rtnetlink: %w", err)
	}
	defer nh.Close()
	_, err = nh.LinkByName(name)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return false, nil
	}
	return err == nil, err
}

// readProcNetInNetns reads /proc/net/<file> as seen from the namespace. It
// switches a dedicated, locked OS thread into the namespace; the thread is
// discarded afterwards (the goroutine exits still locked).
func readProcNetInNetns(ns, file string) (string, error) {
	if ns == "" {
		b, err := os.ReadFile("/proc/net/" + file)
		return string(b), err
	}
	type result struct {
		data string
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		h, err := netns.GetFromPath(netnsPath(ns))
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			ch <- result{err: err}
			return
		}
		b, err := os.ReadFile("/proc/thread-self/net/" + file)
		ch <- result{string(b), err}
	}()
	r := <-ch
	return r.data, r.err
}

// netlinkIPVS counts virtual servers over generic netlink.
type netlinkIPVS struct{}

func (netlinkIPVS) CountServices(netnsPath string) (int, error) {
	h, err := mobyipvs.New(netnsPath)
	if err != nil {
		return 0, err
	}
	defer h.Close()
	svcs, err := h.GetServices()
	return len(svcs), err
}
