package informer

import "k8s.io/client-go/rest"

// ClientSettings sets the watch client's configuration: protobuf, the
// given user agent, a modest rate limit, and compression off unless asked
// for: a watch stream that began as a streaming list stays gzipped for its
// whole life, so every delivery is inflated frame by frame, a cost paid on
// every change for bytes that stay inside the cluster network; the control
// plane's own components turn it off for the same reason.
func ClientSettings(cfg *rest.Config, userAgent string, compression bool) {
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.UserAgent = userAgent
	cfg.QPS, cfg.Burst = 20, 40
	cfg.DisableCompression = !compression
}
