// Command kubectl is upstream kubectl (k8s.io/kubectl, the lab's pinned
// Kubernetes release) built from the lab module, so that tests run the
// documented kubectl command lines with the real client against the lab's
// API server.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
)

func main() {
	os.Exit(cli.Run(cmd.NewDefaultKubectlCommand()))
}
