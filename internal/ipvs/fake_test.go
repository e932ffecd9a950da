package ipvs

import (
	"fmt"
	"net/netip"

	mobyipvs "github.com/moby/ipvs"
)

// Fake is an in-memory Kernel for the package's pure-logic tests: it
// returns the netlink structs it holds, as moby/ipvs would decode them from
// the kernel.
type Fake struct {
	Svcs  []*mobyipvs.Service
	Dests map[*mobyipvs.Service][]*mobyipvs.Destination
	// Links maps a link name to its addresses; a missing name is ErrNoLink.
	Links map[string][]netip.Addr
	// Err, when set, is returned by every call.
	Err    error
	Closed bool
}

var _ Kernel = (*Fake)(nil)

// Services returns the held services.
func (f *Fake) Services() ([]*mobyipvs.Service, error) { return f.Svcs, f.Err }

// Destinations returns the held destinations of s.
func (f *Fake) Destinations(s *mobyipvs.Service) ([]*mobyipvs.Destination, error) {
	if f.Err != nil {
		return nil, f.Err
	}
	return f.Dests[s], nil
}

// LinkAddrs returns the held addresses of the link.
func (f *Fake) LinkAddrs(link string) ([]netip.Addr, error) {
	if f.Err != nil {
		return nil, f.Err
	}
	a, ok := f.Links[link]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNoLink, link)
	}
	return a, nil
}

// Close marks the fake closed.
func (f *Fake) Close() error {
	f.Closed = true
	return nil
}

// Opener returns a Config.Open function that hands out f.
func (f *Fake) Opener() func(string) (Kernel, error) {
	return func(string) (Kernel, error) { return f, nil }
}
