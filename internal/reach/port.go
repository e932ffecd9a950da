package reach

import (
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// DefaultAgentPort is the agent's plain HTTP port (the chart's localListen,
// 127.0.0.1:9760).
const DefaultAgentPort = 9760

// LocalPortName names a container port that declares the plain HTTP port.
// The chart declares only the secure port (https-metrics); a pod that
// declares this one is taken at its word.
const LocalPortName = "http-local"

// agentPort is the pod's plain HTTP port: a container port named
// LocalPortName, else the port of the agent's --listen flag, else
// DefaultAgentPort.
func agentPort(pod *corev1.Pod) int {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == LocalPortName && p.ContainerPort > 0 {
				return int(p.ContainerPort)
			}
		}
	}
	for _, c := range pod.Spec.Containers {
		if port, ok := listenPort(append(append([]string{}, c.Command...), c.Args...)); ok {
			return port
		}
	}
	return DefaultAgentPort
}

// listenPort finds --listen=ADDR or --listen ADDR in argv and returns ADDR's port.
func listenPort(argv []string) (int, bool) {
	for i, a := range argv {
		var addr string
		switch {
		case strings.HasPrefix(a, "--listen="):
			addr = strings.TrimPrefix(a, "--listen=")
		case a == "--listen" && i+1 < len(argv):
			addr = argv[i+1]
		default:
			continue
		}
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			return 0, false
		}
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 || n > 65535 {
			return 0, false
		}
		return n, true
	}
	return 0, false
}
