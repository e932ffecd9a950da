package imagetest

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// cgroupDirs lists the directories of the host's cgroup hierarchies (v1 controllers and the
// unified one), to remove afterwards the ones a test's runtimes left behind empty (podman's
// libpod_parent, containerd's k8s.io, ...).
func cgroupDirs() map[string]bool {
	dirs := map[string]bool{}
	roots, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if strings.Count(strings.TrimPrefix(p, root), "/") > 4 {
				return filepath.SkipDir
			}
			dirs[p] = true
			return nil
		})
	}
	return dirs
}

// removeNewCgroups removes, deepest first, the cgroup directories that are not in before;
// the kernel refuses (and nothing happens) where processes or children remain.
func removeNewCgroups(before map[string]bool) (removed []string) {
	var fresh []string
	for p := range cgroupDirs() {
		if !before[p] {
			fresh = append(fresh, p)
		}
	}
	sort.Slice(fresh, func(i, j int) bool { return strings.Count(fresh[i], "/") > strings.Count(fresh[j], "/") })
	for _, p := range fresh {
		if os.Remove(p) == nil {
			removed = append(removed, p)
		}
	}
	return removed
}
