package cli

import (
	"errors"
	"os"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// KubeConfig is a command's API client configuration: kubectl's flags
// (--kubeconfig, --context, --server, --token ...; cli-runtime's
// ConfigFlags) and the flag set they were parsed with.
type KubeConfig struct {
	Flags *genericclioptions.ConfigFlags
	set   *pflag.FlagSet
}

// ClientFlags are kubectl's client flags without those a command that
// lists cluster-wide and keeps no discovery cache has no use for
// (-n/--namespace, --cache-dir); a command nils more before AddKubeFlags.
func ClientFlags() *genericclioptions.ConfigFlags {
	cf := genericclioptions.NewConfigFlags(false)
	cf.Namespace, cf.CacheDir = nil, nil
	return cf
}

// AddKubeFlags registers cf's flags on fs.
func AddKubeFlags(fs *pflag.FlagSet, cf *genericclioptions.ConfigFlags) KubeConfig {
	own := pflag.NewFlagSet("kubeconfig", pflag.ContinueOnError)
	cf.AddFlags(own)
	fs.AddFlagSet(own)
	return KubeConfig{Flags: cf, set: own}
}

// Explicit reports whether the user chose an API client configuration: a
// kubeconfig flag given, or $KUBECONFIG set. Without either, a command in
// a pod uses the in-cluster configuration.
func (k KubeConfig) Explicit() bool {
	given := os.Getenv("KUBECONFIG") != ""
	if k.set != nil {
		k.set.VisitAll(func(f *pflag.Flag) { given = given || f.Changed })
	}
	return given
}

// Load is the API client configuration as client-go's tools find it:
// the kubeconfig flags when one is given (clientcmd's loading rules, with
// --context, --server ... as overrides), else $KUBECONFIG, else the
// in-cluster configuration in a pod, else ~/.kube/config.
func (kube KubeConfig) Load() (*rest.Config, error) {
	if !kube.Explicit() {
		cfg, err := rest.InClusterConfig()
		if err == nil {
			return cfg, nil
		}
		if !errors.Is(err, rest.ErrNotInCluster) {
			return nil, err
		}
	}
	if !kube.Explicit() {
		// Left to itself clientcmd would fall back to localhost:8080.
		raw, err := kube.Flags.ToRawKubeConfigLoader().RawConfig()
		if err == nil && len(raw.Clusters) == 0 || clientcmd.IsEmptyConfig(err) {
			return nil, errors.New("no API client configuration: not in a pod, no ~/.kube/config; pass --kubeconfig FILE or set $KUBECONFIG")
		}
	}
	return kube.Flags.ToRESTConfig()
}
