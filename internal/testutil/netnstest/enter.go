package netnstest

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// Do runs fn on an OS thread switched into the namespace h; sockets fn
// opens stay in h. The calling goroutine's thread is left alone.
func Do(h netns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		if err := netns.Set(h); err != nil {
			errc <- err
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			// The thread stays locked: the runtime discards it when the
			// goroutine exits, so no other goroutine runs in h by mistake.
			errc <- fmt.Errorf("restore netns: %w (after %v)", err, ferr)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// DoNamed is Do for the namespace called name (as `ip netns add` made it).
func DoNamed(name string, fn func() error) error {
	h, err := netns.GetFromName(name)
	if err != nil {
		return fmt.Errorf("netns %s: %w", name, err)
	}
	defer h.Close()
	return Do(h, fn)
}
