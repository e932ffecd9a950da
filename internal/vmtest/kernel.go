package vmtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// errUnavailable marks a missing prerequisite: the test is skipped.
var errUnavailable = errors.New("unavailable")

// repoRoot finds the module root (the directory holding go.mod) above dir.
func repoRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s", dir)
		}
	}
}

// fetchKernel runs vm/fetch-kernel.sh (which downloads and unpacks Debian's
// kernel package once) under an exclusive lock on the cache directory, and
// returns the kernel directory and its version.
func fetchKernel(root, cache string, logf func(string, ...any)) (dir, version string, err error) {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", "", err
	}
	lock, err := os.OpenFile(filepath.Join(cache, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)

	cmd := exec.Command("bash", filepath.Join(root, "vm/fetch-kernel.sh"), cache)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if s := strings.TrimSpace(stderr.String()); s != "" {
		logf("%s", s)
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 3 {
		return "", "", fmt.Errorf("%w: kernel package: %s", errUnavailable, strings.TrimSpace(stderr.String()))
	}
	if err != nil {
		return "", "", fmt.Errorf("vm/fetch-kernel.sh: %v: %s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	dir = lines[len(lines)-1]
	v, err := os.ReadFile(filepath.Join(dir, "version"))
	if err != nil {
		return "", "", fmt.Errorf("%w: kernel cache %s: %v", errUnavailable, dir, err)
	}
	return dir, strings.TrimSpace(string(v)), nil
}
