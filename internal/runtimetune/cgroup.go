package runtimetune

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CgroupRoot is where the process's cgroup file system is mounted.
const CgroupRoot = "/sys/fs/cgroup"

// noLimitV1 is at or above what cgroup v1 reports for "no limit" (the
// largest page-aligned int64).
const noLimitV1 = 1 << 62

// CgroupMemoryLimit reads the memory limit of the cgroup the process runs
// in under root: memory.max (cgroup v2, as a container sees its own cgroup
// at the root) or memory/memory.limit_in_bytes (v1). ok is false when no
// limit is set or no file is found.
func CgroupMemoryLimit(root string) (limit int64, ok bool, err error) {
	for _, f := range []string{"memory.max", filepath.Join("memory", "memory.limit_in_bytes")} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, false, err
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return 0, false, fmt.Errorf("%s: %q is not a byte count or \"max\"", filepath.Join(root, f), s)
		}
		if n >= noLimitV1 {
			return 0, false, nil
		}
		return n, true, nil
	}
	return 0, false, nil
}
