package vmtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// qemuRun is one boot of the guest.
type qemuRun struct {
	bin       string
	kernel    string
	initrd    string
	memoryMiB int
	cpus      int
	network   bool
	accel     string // "kvm" or "tcg"
	dir       string // console.log and out.log go here
	verbose   bool   // full kernel console
}

func (q qemuRun) args() []string {
	a := []string{
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-m", strconv.Itoa(q.memoryMiB), "-smp", strconv.Itoa(q.cpus),
		"-kernel", q.kernel, "-initrd", q.initrd,
		"-append", q.cmdline(),
		"-serial", "file:" + filepath.Join(q.dir, "console.log"),
		"-serial", "file:" + filepath.Join(q.dir, "out.log"),
	}
	if q.accel == "kvm" {
		a = append(a, "-accel", "kvm")
	} else {
		a = append(a, "-accel", "tcg,thread=multi")
	}
	if q.network {
		a = append(a, "-netdev", "user,id=n0", "-device", "virtio-net-pci,netdev=n0")
	}
	return a
}

func (q qemuRun) cmdline() string {
	c := "console=ttyS0 panic=-1 rdinit=/init printk.time=1"
	if !q.verbose {
		c += " quiet loglevel=4"
	}
	return c
}

// errNoBoot says the guest's init did not start within the boot deadline.
var errNoBoot = errors.New("guest did not reach init")

// run boots the guest and waits for it to power off. On timeout, when init
// has not started by bootDeadline (0: no deadline), or on ctx cancellation,
// the qemu process — and only it, by its PID — is killed.
func (q qemuRun) run(ctx context.Context, timeout, bootDeadline time.Duration) (string, error) {
	cmd := exec.Command(q.bin, q.args()...)
	var se strings.Builder
	cmd.Stderr = &se
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	kill := func(reason error) (string, error) {
		_ = cmd.Process.Kill()
		<-done
		return se.String(), fmt.Errorf("%w: killed qemu (pid %d)", reason, cmd.Process.Pid)
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	booted := bootDeadline == 0
	for {
		select {
		case err := <-done:
			return se.String(), err
		case <-deadline.C:
			return kill(fmt.Errorf("guest still running after %s", timeout))
		case <-ctx.Done():
			return kill(ctx.Err())
		case <-tick.C:
			if booted {
				continue
			}
			if strings.Contains(readLog(q.dir, "out.log"), markPrefix+"booted") {
				booted = true
			} else if time.Since(start) > bootDeadline {
				return kill(fmt.Errorf("%w within %s", errNoBoot, bootDeadline))
			}
		}
	}
}

// kvmUsable reports whether /dev/kvm can be opened.
func kvmUsable() bool {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

func readLog(dir, name string) string {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "(" + err.Error() + ")"
	}
	return string(b)
}
