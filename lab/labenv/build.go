package labenv

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Binaries are the programs the lab builds from its go.mod: the upstream
// ones, watchonly (the live benchmark's API-watch reference), nodestream
// (the kubelet's streaming endpoints, per node) and kubectl (the client the
// docs scenario runs the documented command lines with).
var Binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-proxy", "watchonly", "nodestream", "kubectl"}

// ModuleDir is the lab module's root (where go.mod lives), found from this
// source file's location (or, under -trimpath, `go env GOMOD`);
// NETDRIFT_LAB_MODULE overrides it.
func ModuleDir() string {
	if d := os.Getenv("NETDRIFT_LAB_MODULE"); d != "" {
		return d
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		return filepath.Dir(filepath.Dir(file))
	}
	// Built with -trimpath: ask the go command, from the working directory.
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if mod := strings.TrimSpace(string(out)); err == nil && strings.HasSuffix(mod, "/lab/go.mod") {
		return filepath.Dir(mod)
	}
	return "lab"
}

// DefaultBinDir is the git-ignored cache the binaries are built into;
// NETDRIFT_LAB_BIN overrides it.
func DefaultBinDir() string {
	if d := os.Getenv("NETDRIFT_LAB_BIN"); d != "" {
		return d
	}
	return filepath.Join(ModuleDir(), ".cache", "bin")
}

// inputsHash fingerprints what a binary is built from: go.mod, go.sum, the
// Go toolchain version and the main package's sources.
func inputsHash(modDir, name string) (string, error) {
	h := sha256.New()
	fmt.Fprintln(h, runtime.Version())
	files := []string{filepath.Join(modDir, "go.mod"), filepath.Join(modDir, "go.sum")}
	mains, err := filepath.Glob(filepath.Join(modDir, "cmd", name, "*.go"))
	if err != nil {
		return "", err
	}
	for _, f := range append(files, mains...) {
		fh, err := os.Open(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintln(h, filepath.Base(f))
		_, err = io.Copy(h, fh)
		fh.Close()
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// EnsureBinaries builds every binary that is missing or whose inputs
// changed into binDir (CGO_ENABLED=0), printing progress to w.
func EnsureBinaries(binDir string, w io.Writer) error {
	modDir := ModuleDir()
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return err
	}
	for _, name := range Binaries {
		sum, err := inputsHash(modDir, name)
		if err != nil {
			return err
		}
		out := filepath.Join(binDir, name)
		stamp := out + ".inputs"
		if old, err := os.ReadFile(stamp); err == nil && string(old) == sum {
			if _, err := os.Stat(out); err == nil {
				fmt.Fprintf(w, "lab: %s up to date\n", name)
				continue
			}
		}
		fmt.Fprintf(w, "lab: building %s (first build of the Kubernetes tree takes several minutes)...\n", name)
		start := time.Now()
		cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./cmd/"+name)
		cmd.Dir = modDir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		cmd.Stdout, cmd.Stderr = w, w
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("build %s: %w", name, err)
		}
		if err := os.WriteFile(stamp, []byte(sum), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(w, "lab: built %s in %s\n", name, time.Since(start).Round(time.Second))
	}
	return nil
}

// checkBinaries reports a missing binary with the command that builds it.
// kubectl is a client the tests run, not a process of the lab: a lab
// starts without it.
func checkBinaries(binDir string) error {
	for _, name := range Binaries {
		if name == "kubectl" {
			continue
		}
		if _, err := os.Stat(filepath.Join(binDir, name)); err != nil {
			return fmt.Errorf("%s missing in %s: run `make lab-bins` (or `go run ./cmd/lab build` in lab/)", name, binDir)
		}
	}
	return nil
}
