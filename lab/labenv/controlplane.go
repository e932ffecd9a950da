package labenv

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"
)

func (l *Lab) etcdArgs() []string {
	return []string{filepath.Join(l.opts.BinDir, "etcd"),
		"--name=lab",
		"--data-dir=" + filepath.Join(l.opts.Dir, "etcd"),
		"--listen-client-urls=http://127.0.0.1:2379",
		"--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380",
		"--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=lab=http://127.0.0.1:2380",
		"--unsafe-no-fsync",
		"--log-level=warn",
	}
}

func (l *Lab) apiserverArgs() []string {
	p := l.pki
	kubeletCert, kubeletKey := l.kubeletClientCert()
	admission := "--disable-admission-plugins=ServiceAccount"
	if l.opts.ServiceAccountAdmission {
		admission = "--enable-admission-plugins=ServiceAccount"
	}
	return []string{filepath.Join(l.opts.BinDir, "kube-apiserver"),
		"--etcd-servers=http://127.0.0.1:2379",
		"--bind-address=" + routerIP,
		"--advertise-address=" + routerIP,
		"--secure-port=" + strconv.Itoa(apiPort),
		"--cert-dir=" + filepath.Join(l.opts.Dir, "apiserver"),
		"--tls-cert-file=" + p.ServingCert,
		"--tls-private-key-file=" + p.ServingKey,
		"--client-ca-file=" + p.CACert,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.SAPub,
		"--service-account-signing-key-file=" + p.SAKey,
		"--service-cluster-ip-range=" + serviceCIDR,
		"--authorization-mode=Node,RBAC",
		// The kubelet stand-ins (nodestream.go) by node IP: lab node names do not resolve.
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-client-certificate=" + kubeletCert, "--kubelet-client-key=" + kubeletKey,
		"--kubelet-certificate-authority=" + p.CACert,
		// Pods here run no containers and mount nothing; skipping the
		// ServiceAccount admission avoids racing the controller that
		// creates the "default" account (Options.ServiceAccountAdmission).
		admission,
		"--profiling=false",
		"--v=1",
	}
}

func (l *Lab) controllerManagerArgs() []string {
	p := l.pki
	return []string{filepath.Join(l.opts.BinDir, "kube-controller-manager"),
		"--kubeconfig=" + l.kubeconfig,
		"--authentication-kubeconfig=" + l.kubeconfig,
		"--authorization-kubeconfig=" + l.kubeconfig,
		"--bind-address=127.0.0.1",
		"--cert-dir=" + filepath.Join(l.opts.Dir, "kcm"),
		"--leader-elect=false",
		"--root-ca-file=" + p.CACert,
		"--cluster-cidr=" + clusterCIDR,
		"--service-cluster-ip-range=" + serviceCIDR,
		"--allocate-node-cidrs=false",
		"--profiling=false",
		"--v=1",
	}
}

// startControlPlane starts etcd, the API server and the controller manager
// in the router namespace and waits until the API server is ready.
func (l *Lab) startControlPlane(ctx context.Context) error {
	if err := l.writeKubeletPKI(); err != nil {
		return err
	}
	if _, err := l.start("etcd", routerNS(l.opts.Name), l.etcdArgs()); err != nil {
		return err
	}
	if err := l.StartAPIServer(ctx); err != nil {
		return err
	}
	_, err := l.start("kube-controller-manager", routerNS(l.opts.Name), l.controllerManagerArgs())
	return err
}

// StartAPIServer (re)starts the API server and waits until /readyz is ok.
func (l *Lab) StartAPIServer(ctx context.Context) error {
	if p := l.proc("kube-apiserver"); p != nil && p.Alive() {
		return fmt.Errorf("kube-apiserver already running (pid %d)", p.PID)
	}
	if _, err := l.start("kube-apiserver", routerNS(l.opts.Name), l.apiserverArgs()); err != nil {
		return err
	}
	return l.waitReady(ctx, 90*time.Second)
}

// StopAPIServer stops the API server (SIGTERM, then SIGKILL after 5 s).
func (l *Lab) StopAPIServer() error {
	p := l.proc("kube-apiserver")
	if p == nil {
		return fmt.Errorf("kube-apiserver was never started")
	}
	p.stop(5 * time.Second)
	return nil
}

func (l *Lab) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		body, err := l.cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && string(body) == "ok" {
			return nil
		}
		last = err
		if p := l.proc("kube-apiserver"); p != nil && !p.Alive() {
			return fmt.Errorf("kube-apiserver exited; see %s", p.Log)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("api server not ready after %s: %v (log %s)", timeout, last, filepath.Join(l.opts.Dir, "logs", "kube-apiserver.log"))
		case <-time.After(200 * time.Millisecond):
		}
	}
}
