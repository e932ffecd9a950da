package nftables

import (
	"github.com/google/nftables"
	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/nsutil"
)

// WithConn opens an nf_tables netlink connection in the namespace.
func WithConn(ns string, fn func(*nftables.Conn) error) error {
	return nsutil.WithFd(ns, func(fd int) error {
		opts := []nftables.ConnOption{nftables.AsLasting()}
		if fd != 0 {
			opts = append(opts, nftables.WithNetNSFd(fd))
		}
		conn, err := nftables.New(opts...)
		if err != nil {
			return nfevents.DialError(err)
		}
		defer conn.CloseLasting()
		return fn(conn)
	})
}
