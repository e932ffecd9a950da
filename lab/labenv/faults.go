package labenv

import (
	"fmt"
	"syscall"
	"time"
)

// KillAgent kills node's netdrift agent with SIGKILL (no shutdown of its
// own: as an OOM kill or a node's crash ends it) and returns once it is
// gone; StartAgent starts it again.
func (l *Lab) KillAgent(node string) error {
	i, err := l.index(node)
	if err != nil {
		return err
	}
	p := l.proc(agentName(i))
	if p == nil || !p.Alive() {
		return fmt.Errorf("no running agent on %q", node)
	}
	if err := p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	for end := time.Now().Add(10 * time.Second); p.Alive(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			return fmt.Errorf("agent on %q (pid %d) still running 10 s after SIGKILL", node, p.PID)
		}
	}
	return nil
}
