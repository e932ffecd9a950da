package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestServicesFromAPIBadKubeconfig(t *testing.T) {
	_, err := servicesFromAPI(context.Background(), kubeconfigFlags(t, "--kubeconfig", filepath.Join(t.TempDir(), "missing")))
	if err == nil || !strings.HasPrefix(err.Error(), "kubeconfig: ") {
		t.Fatalf("got %v", err)
	}
}
