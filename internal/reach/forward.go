package reach

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/klog/v2"
)

// forward port-forwards an ephemeral local port on 127.0.0.1 to port of
// pod, through the API server, and returns the local port and the release
// function that stops the forward and waits for it to end.
func (r *Reacher) forward(ctx context.Context, pod string, port int, errs *lastError) (int, func(), error) {
	dialer, err := r.dialer(pod)
	if err != nil {
		return 0, nil, err
	}
	// The forward outlives ctx (until release); its errors go to errs.
	fwdCtx, cancel := context.WithCancel(klog.NewContext(context.WithoutCancel(ctx), errs.logger()))
	ready := make(chan struct{})
	pf, err := portforward.NewOnAddressesWithContext(fwdCtx, dialer, []string{"127.0.0.1"},
		[]string{"0:" + strconv.Itoa(port)}, ready, io.Discard, r.ErrOut)
	if err != nil {
		cancel()
		return 0, nil, err
	}
	done := make(chan error, 1)
	go func() { done <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		if err == nil {
			err = errors.New("port-forward ended before it was ready")
		}
		return 0, nil, err
	case <-ctx.Done():
		cancel()
		<-done
		return 0, nil, ctx.Err()
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 {
		cancel()
		<-done
		return 0, nil, fmt.Errorf("port-forward: local port: %v", err)
	}
	var once sync.Once
	release := func() { once.Do(func() { cancel(); <-done }) }
	return int(ports[0].Local), release, nil
}

// dialer is kubectl port-forward's: WebSockets (SPDY tunnelled over a
// WebSocket) first, SPDY when the API server refuses the upgrade or an
// HTTPS proxy is in the way.
func (r *Reacher) dialer(pod string) (httpstream.Dialer, error) {
	u := r.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(r.namespace).
		Name(pod).SubResource("portforward").URL()
	transport, upgrader, err := spdy.RoundTripperFor(r.cfg)
	if err != nil {
		return nil, err
	}
	spdyDialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	ws, err := portforward.NewSPDYOverWebsocketDialer(u, r.cfg)
	if err != nil {
		return nil, err
	}
	return portforward.NewFallbackDialer(ws, spdyDialer, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	}), nil
}

// portForwardVerbs are the verbs pods/portforward is authorized with: the
// WebSocket upgrade (a GET) is checked as get and as create, the SPDY one
// (a POST) as create.
var portForwardVerbs = []string{"get", "create"}

// explainForwardError asks the API server which verbs on pods/portforward
// the caller lacks (SelfSubjectAccessReviews, which every authenticated
// user may create) so a refusal names the missing permission.
func (r *Reacher) explainForwardError(ctx context.Context, pod, node string, err error) error {
	var missing []string
	for _, verb := range portForwardVerbs {
		allowed, reviewErr := r.may(ctx, verb, pod)
		if reviewErr != nil {
			missing = nil
			break
		}
		if !allowed {
			missing = append(missing, verb)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("you may not port-forward to the agent pod %s on node %q: the responder needs RBAC verbs get and create on pods/portforward in namespace %q, and lacks %s (the chart's netdrift-responder Role; docs/install.md): %w",
			pod, node, r.namespace, strings.Join(missing, " and "), err)
	}
	return fmt.Errorf("port-forward to the agent pod %s/%s on node %q: %w", r.namespace, pod, node, err)
}

func (r *Reacher) may(ctx context.Context, verb, pod string) (bool, error) {
	review := &authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authzv1.ResourceAttributes{
			Namespace: r.namespace, Verb: verb, Resource: "pods", Subresource: "portforward", Name: pod,
		}}}
	got, err := r.cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return got.Status.Allowed, nil
}
