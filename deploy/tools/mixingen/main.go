// Command mixingen renders the netdrift monitoring mixin (deploy/mixin, jsonnet) into the
// files deploy/ ships: the plain rules file, the PrometheusRule, the Helm chart's copies of
// both (its PrometheusRule and its dashboard ConfigMap read them), and the Grafana dashboard.
//
//	go run ./mixingen [-mixin ../mixin] [-out ..]
//
// It evaluates the mixin with go-jsonnet (the jsonnet implementation in Go, so no jsonnet
// binary is needed) and writes YAML with go-yaml. deploy/mixin_test.go renders into a
// temporary directory and fails when a checked-in file differs.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	mixin := flag.String("mixin", "../mixin", "the mixin directory (mixin.libsonnet)")
	out := flag.String("out", "..", "the deploy directory to write into")
	flag.Parse()
	files, err := render(*mixin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mixingen:", err)
		os.Exit(1)
	}
	for _, f := range files {
		p := filepath.Join(*out, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "mixingen:", err)
			os.Exit(1)
		}
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "mixingen:", err)
			os.Exit(1)
		}
	}
}
