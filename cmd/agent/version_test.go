package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// TestBuildStampsVersion: the linker flags of the Makefile's build target
// name variables that exist (-X ignores unknown ones silently): a binary
// linked with them prints them in version -o json.
func TestBuildStampsVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("links a binary")
	}
	plan, err := exec.Command("make", "-C", "../..", "-n", "build", "VERSION=v9.8.7", "COMMIT=c0ffee", "BUILD_DATE=2026-12-05T14:00:00Z").Output()
	if err != nil {
		t.Skipf("make -n build: %v", err)
	}
	m := regexp.MustCompile(`-ldflags "([^"]*)"`).FindSubmatch(plan)
	if m == nil {
		t.Fatalf("make -n build sets no -ldflags: %s", plan)
	}
	bin := filepath.Join(t.TempDir(), "netdrift")
	build := exec.Command("go", "build", "-ldflags", string(m[1]), "-o", bin, ".")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	out, err := exec.Command(bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("version: %v", err)
	}
	var v map[string]string
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	if v["kind"] != "Version" || v["version"] != "v9.8.7" || v["commit"] != "c0ffee" || v["build_date"] != "2026-12-05T14:00:00Z" || v["go_version"] == "" {
		t.Errorf("version -o json of a binary built as make build builds it: %s", out)
	}
}
