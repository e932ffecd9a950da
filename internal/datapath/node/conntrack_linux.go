package node

import (
	"context"
	"errors"
	"fmt"

	mdnetlink "github.com/mdlayher/netlink"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nsutil"
	"github.com/ti-mo/conntrack"
	"github.com/ti-mo/netfilter"
	"github.com/vishvananda/netns"
)

// ti-mo/conntrack is used rather than vishvananda/netlink's conntrack dump
// because it also subscribes to conntrack events (NEW flows to stale
// backends), opens its socket in a given namespace without switching the
// thread, and decodes status flags and TCP state into typed fields.

// dumpConntrack dumps the conntrack table of a namespace. No logic.
func dumpConntrack(ns netns.NsHandle) ([]conntrack.Flow, error) {
	c, err := conntrack.Dial(&mdnetlink.Config{NetNS: int(ns)})
	if err != nil {
		return nil, fmt.Errorf("%w: conntrack netlink: %v", model.ErrUnsupported, err)
	}
	defer c.Close()
	fs, err := c.Dump(nil)
	if err != nil {
		return nil, fmt.Errorf("%w: conntrack dump: %v", model.ErrUnsupported, err)
	}
	return fs, nil
}

// WatchConntrackNew calls fn for every new conntrack entry in a namespace
// ("" = the caller's own) until ctx ends. Events are hints: a full dump
// remains the truth. It returns ctx's error, or the first socket error.
func WatchConntrackNew(ctx context.Context, netnsSpec string, fn func(model.Flow)) error {
	ns, err := nsutil.Open(netnsSpec)
	if err != nil {
		return err
	}
	defer ns.Close()
	c, err := conntrack.Dial(&mdnetlink.Config{NetNS: int(ns)})
	if err != nil {
		return fmt.Errorf("%w: conntrack netlink: %v", model.ErrUnsupported, err)
	}
	events := make(chan conntrack.Event, 1024)
	errs, err := c.Listen(events, 1, []netfilter.NetlinkGroup{netfilter.GroupCTNew})
	if err != nil {
		c.Close()
		return fmt.Errorf("%w: conntrack events: %v", model.ErrUnsupported, err)
	}
	defer closeListening(c, events, errs)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-errs:
			if err == nil {
				err = errors.New("conntrack event socket closed")
			}
			return err
		case ev := <-events:
			if ev.Type != conntrack.EventNew || ev.Flow == nil {
				continue
			}
			if f, ok := flowFromConntrack(*ev.Flow); ok {
				fn(f)
			}
		}
	}
}

// closeListening closes a listening Conn. Close waits for the library's
// worker, which may be blocked handing over an event or an error, so both
// channels are drained until it returns.
func closeListening(c *conntrack.Conn, events chan conntrack.Event, errs chan error) {
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-events:
			case <-errs:
			case <-done:
				return
			}
		}
	}()
	c.Close()
	close(done)
}
