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
}

func (q qemuRun) args() []string {
	a := []string{
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-m", strconv.Itoa(q.memoryMiB), "-smp", strconv.Itoa(q.cpus),
		"-kernel", q.kernel, "-initrd", q.initrd,
		"-append", "console=ttyS0 quiet loglevel=4 panic=-1 rdinit=/init",
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

// run boots the guest and waits for it to power off. On timeout (or ctx
// cancellation) the qemu process — and only it, by its PID — is killed.
func (q qemuRun) run(ctx context.Context, timeout time.Duration) (stderr string, err error) {
	cmd := exec.Command(q.bin, q.args()...)
	var se strings.Builder
	cmd.Stderr = &se
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err = <-done:
	case <-timer.C:
		_ = cmd.Process.Kill()
		<-done
		err = fmt.Errorf("guest still running after %s: killed qemu (pid %d)", timeout, cmd.Process.Pid)
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		err = ctx.Err()
	}
	return se.String(), err
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
