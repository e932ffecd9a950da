package clusterfile

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netdrift/netdrift/internal/jsonscan"
)

// The members of a Service the scan reads (load_scan.go), as kubectl
// prints them; any other member (a condition, ingress ports) or value
// (the last-applied annotation with its escapes) sends the Service to the
// decoder.

// scanService reads a Service as addObject would decode it, or returns
// false.
func scanService(c *jsonscan.Cursor) (*corev1.Service, bool) {
	o := &corev1.Service{}
	ok := scanObject(c, "Service", &o.TypeMeta, &o.ObjectMeta, func(name []byte) (uint, bool) {
		switch string(name) {
		case "spec":
			return 8, scanServiceSpec(c, &o.Spec)
		case "status":
			return 16, scanServiceStatus(c, &o.Status)
		}
		return 0, false
	})
	return o, ok
}

func scanServiceSpec(c *jsonscan.Cursor, s *corev1.ServiceSpec) bool {
	return scanMembers(c, func(name []byte) (uint, bool) {
		switch string(name) {
		case "ports":
			return 1 << 0, scanServicePorts(c, &s.Ports)
		case "selector":
			s.Selector = map[string]string{}
			return 1 << 1, scanStringMap(c, s.Selector)
		case "clusterIP":
			return 1 << 2, scanStr(c, &s.ClusterIP)
		case "clusterIPs":
			return 1 << 3, scanStringList(c, &s.ClusterIPs)
		case "type":
			return 1 << 4, scanStr(c, (*string)(&s.Type))
		case "externalIPs":
			return 1 << 5, scanStringList(c, &s.ExternalIPs)
		case "sessionAffinity":
			return 1 << 6, scanStr(c, (*string)(&s.SessionAffinity))
		case "loadBalancerIP":
			return 1 << 7, scanStr(c, &s.LoadBalancerIP)
		case "loadBalancerSourceRanges":
			return 1 << 8, scanStringList(c, &s.LoadBalancerSourceRanges)
		case "externalName":
			return 1 << 9, scanStr(c, &s.ExternalName)
		case "externalTrafficPolicy":
			return 1 << 10, scanStr(c, (*string)(&s.ExternalTrafficPolicy))
		case "healthCheckNodePort":
			return 1 << 11, scanInt32(c, &s.HealthCheckNodePort)
		case "publishNotReadyAddresses":
			v, ok := c.Bool()
			s.PublishNotReadyAddresses = v
			return 1 << 12, ok
		case "ipFamilies":
			return 1 << 13, scanStringList(c, &s.IPFamilies)
		case "ipFamilyPolicy":
			return 1 << 14, scanStrPtr(c, &s.IPFamilyPolicy)
		case "allocateLoadBalancerNodePorts":
			return 1 << 15, scanBoolPtr(c, &s.AllocateLoadBalancerNodePorts)
		case "loadBalancerClass":
			return 1 << 16, scanStrPtr(c, &s.LoadBalancerClass)
		case "internalTrafficPolicy":
			return 1 << 17, scanStrPtr(c, &s.InternalTrafficPolicy)
		case "trafficDistribution":
			return 1 << 18, scanStrPtr(c, &s.TrafficDistribution)
		case "sessionAffinityConfig":
			s.SessionAffinityConfig = &corev1.SessionAffinityConfig{}
			return 1 << 19, scanAffinityConfig(c, s.SessionAffinityConfig)
		}
		return 0, false
	})
}

func scanServicePorts(c *jsonscan.Cursor, dst *[]corev1.ServicePort) bool {
	ps := []corev1.ServicePort{}
	ok := scanElements(c, func() bool {
		ps = append(ps, corev1.ServicePort{})
		p := &ps[len(ps)-1]
		return scanMembers(c, func(name []byte) (uint, bool) {
			switch string(name) {
			case "name":
				return 1, scanStr(c, &p.Name)
			case "protocol":
				return 2, scanStr(c, (*string)(&p.Protocol))
			case "appProtocol":
				return 4, scanStrPtr(c, &p.AppProtocol)
			case "port":
				return 8, scanInt32(c, &p.Port)
			case "targetPort":
				return 16, scanIntOrString(c, &p.TargetPort)
			case "nodePort":
				return 32, scanInt32(c, &p.NodePort)
			}
			return 0, false
		})
	})
	*dst = ps
	return ok
}

// scanAffinityConfig reads {"clientIP": {"timeoutSeconds": N}}.
func scanAffinityConfig(c *jsonscan.Cursor, a *corev1.SessionAffinityConfig) bool {
	return scanMembers(c, func(name []byte) (uint, bool) {
		if string(name) != "clientIP" {
			return 0, false
		}
		a.ClientIP = &corev1.ClientIPConfig{}
		return 1, scanMembers(c, func(name []byte) (uint, bool) {
			if string(name) != "timeoutSeconds" {
				return 0, false
			}
			var v int32
			a.ClientIP.TimeoutSeconds = &v
			return 1, scanInt32(c, &v)
		})
	})
}

// scanIntOrString reads a number or a string as intstr.IntOrString's
// UnmarshalJSON does.
func scanIntOrString(c *jsonscan.Cursor, v *intstr.IntOrString) bool {
	at := *c
	if s, ok := c.Str(); ok {
		*v = intstr.IntOrString{Type: intstr.String, StrVal: string(s)}
		return true
	}
	*c = at
	*v = intstr.IntOrString{Type: intstr.Int}
	return scanInt32(c, &v.IntVal)
}

// scanServiceStatus reads a status with load-balancer ingress addresses
// at most.
func scanServiceStatus(c *jsonscan.Cursor, s *corev1.ServiceStatus) bool {
	return scanMembers(c, func(name []byte) (uint, bool) {
		if string(name) != "loadBalancer" {
			return 0, false
		}
		return 1, scanMembers(c, func(name []byte) (uint, bool) {
			if string(name) != "ingress" {
				return 0, false
			}
			s.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{}
			return 1, scanElements(c, func() bool {
				var in corev1.LoadBalancerIngress
				ok := scanMembers(c, func(name []byte) (uint, bool) {
					switch string(name) {
					case "ip":
						return 1, scanStr(c, &in.IP)
					case "hostname":
						return 2, scanStr(c, &in.Hostname)
					case "ipMode":
						return 4, scanStrPtr(c, &in.IPMode)
					}
					return 0, false
				})
				s.LoadBalancer.Ingress = append(s.LoadBalancer.Ingress, in)
				return ok
			})
		})
	})
}

func scanInt32(c *jsonscan.Cursor, dst *int32) bool {
	v, ok := c.Int(32)
	*dst = int32(v)
	return ok
}

// scanStringList reads an array of strings.
func scanStringList[T ~string](c *jsonscan.Cursor, dst *[]T) bool {
	ss := []T{}
	ok := scanElements(c, func() bool {
		s, ok := c.Str()
		ss = append(ss, T(s))
		return ok
	})
	*dst = ss
	return ok
}
