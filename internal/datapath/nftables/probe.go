package nftables

import (
	"fmt"

	"github.com/google/nftables"
)

// ProbeTables reports the kube-proxy nftables tables and how many
// service-ips elements they hold.
func ProbeTables(ns string) (string, int, error) {
	var found []string
	services := 0
	err := WithConn(ns, func(conn *nftables.Conn) error {
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

// IPTablesKubeServices lists the families ("ip", "ip6") whose
// iptables-nft nat table has a KUBE-SERVICES chain.
func IPTablesKubeServices(ns string) ([]string, error) {
	var found []string
	err := WithConn(ns, func(conn *nftables.Conn) error {
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
