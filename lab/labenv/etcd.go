package labenv

import (
	"context"
	"fmt"
	"net"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// CompactEtcd compacts the lab's etcd to its current revision: no watch can
// then resume from an older resource version, and every client must list
// again (what a long API server outage does on a real cluster). It returns
// the revision compacted to.
func (l *Lab) CompactEtcd(ctx context.Context) (int64, error) {
	dial := DialContextIn(routerNS(l.opts.Name))
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"127.0.0.1:2379"},
		DialTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return dial(ctx, "tcp", addr) }),
		},
	})
	if err != nil {
		return 0, fmt.Errorf("etcd client: %w", err)
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, "/netdrift-lab/compact-probe")
	if err != nil {
		return 0, fmt.Errorf("etcd revision: %w", err)
	}
	rev := resp.Header.Revision
	if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return 0, fmt.Errorf("etcd compact to %d: %w", rev, err)
	}
	return rev, nil
}
