// Command watchonly runs client-go informers on what the netdrift agent
// watches — every Service, EndpointSlice and Node, the Pods of one node and
// that node's Lease — over protobuf, with handlers that do nothing, until
// SIGTERM. The live benchmark runs it beside the agent and kube-proxy: its
// CPU is what the API watch alone costs any informer-based observer, a
// floor under the agent's (kube-proxy pays the same watch).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server")
	node := flag.String("node-name", "", "the node whose Pods and Lease are watched")
	flag.Parse()
	if *kubeconfig == "" || *node == "" {
		fmt.Fprintln(os.Stderr, "watchonly: --kubeconfig and --node-name are required")
		os.Exit(2)
	}
	if err := run(*kubeconfig, *node); err != nil {
		fmt.Fprintln(os.Stderr, "watchonly:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, node string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	// As the agent's client: protobuf.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	shared := informers.NewSharedInformerFactory(cs, 0)
	pods := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
	}))
	leases := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(corev1.NamespaceNodeLease),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", node).String()
		}))
	nop := cache.ResourceEventHandlerFuncs{AddFunc: func(any) {}, UpdateFunc: func(any, any) {}, DeleteFunc: func(any) {}}
	for _, inf := range []cache.SharedIndexInformer{
		shared.Core().V1().Services().Informer(),
		shared.Discovery().V1().EndpointSlices().Informer(),
		shared.Core().V1().Nodes().Informer(),
		pods.Core().V1().Pods().Informer(),
		leases.Coordination().V1().Leases().Informer(),
	} {
		if _, err := inf.AddEventHandler(nop); err != nil {
			return err
		}
	}
	for _, f := range []informers.SharedInformerFactory{shared, pods, leases} {
		f.Start(ctx.Done())
	}
	for _, f := range []informers.SharedInformerFactory{shared, pods, leases} {
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return fmt.Errorf("cache of %v did not sync", typ)
			}
		}
	}
	fmt.Println("watchonly: caches synced")
	<-ctx.Done()
	return nil
}
