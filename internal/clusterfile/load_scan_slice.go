package clusterfile

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netdrift/netdrift/internal/jsonscan"
)

// The members of an EndpointSlice the scan reads (load_scan.go), as
// kubectl prints them; any other member sends the slice to the decoder.

// scanObjectMeta reads the metadata kubectl prints for an object (no
// managed fields, no deletion timestamp or finalizers).
func scanObjectMeta(c *jsonscan.Cursor, m *metav1.ObjectMeta) bool {
	return scanMembers(c, func(name []byte) (uint, bool) {
		switch string(name) {
		case "name":
			return 1, scanStr(c, &m.Name)
		case "generateName":
			return 2, scanStr(c, &m.GenerateName)
		case "namespace":
			return 4, scanStr(c, &m.Namespace)
		case "uid":
			return 8, scanStr(c, (*string)(&m.UID))
		case "resourceVersion":
			return 16, scanStr(c, &m.ResourceVersion)
		case "generation":
			v, ok := c.Int(64)
			m.Generation = v
			return 32, ok
		case "creationTimestamp": // as metav1.Time.UnmarshalJSON reads it
			v, ok := c.Str()
			t, err := time.Parse(time.RFC3339, string(v))
			m.CreationTimestamp = metav1.NewTime(t.Local())
			return 64, ok && err == nil
		case "labels":
			m.Labels = map[string]string{}
			return 128, scanStringMap(c, m.Labels)
		case "annotations":
			m.Annotations = map[string]string{}
			return 256, scanStringMap(c, m.Annotations)
		case "ownerReferences":
			return 512, scanOwnerRefs(c, &m.OwnerReferences)
		}
		return 0, false
	})
}

func scanOwnerRefs(c *jsonscan.Cursor, dst *[]metav1.OwnerReference) bool {
	refs := []metav1.OwnerReference{}
	ok := scanElements(c, func() bool {
		var r metav1.OwnerReference
		ok := scanMembers(c, func(name []byte) (uint, bool) {
			switch string(name) {
			case "apiVersion":
				return 1, scanStr(c, &r.APIVersion)
			case "kind":
				return 2, scanStr(c, &r.Kind)
			case "name":
				return 4, scanStr(c, &r.Name)
			case "uid":
				return 8, scanStr(c, (*string)(&r.UID))
			case "controller":
				return 16, scanBoolPtr(c, &r.Controller)
			case "blockOwnerDeletion":
				return 32, scanBoolPtr(c, &r.BlockOwnerDeletion)
			}
			return 0, false
		})
		refs = append(refs, r)
		return ok
	})
	*dst = refs
	return ok
}

func scanBoolPtr(c *jsonscan.Cursor, dst **bool) bool {
	v, ok := c.Bool()
	*dst = &v
	return ok
}

// epScratch is what reading a slice's endpoints reuses from slice to slice:
// the endpoints are read into it and copied out at their number, and their
// addresses share one string and one array per slice (two allocations a
// slice, not two an address).
type epScratch struct {
	eps   []discoveryv1.Endpoint
	spans []addrSpan // per endpoint, its addresses in ends
	text  []byte     // every address of the slice, one after the other
	ends  []int      // where each address ends in text
}

type addrSpan struct {
	from, to int
	set      bool // the endpoint has an addresses member
}

func scanEndpoints(c *jsonscan.Cursor, s *epScratch, dst *[]discoveryv1.Endpoint) bool {
	s.eps, s.spans, s.text, s.ends = s.eps[:0], s.spans[:0], s.text[:0], s.ends[:0]
	ok := scanElements(c, func() bool {
		s.eps = append(s.eps, discoveryv1.Endpoint{})
		s.spans = append(s.spans, addrSpan{})
		return scanEndpoint(c, s, len(s.eps)-1)
	})
	if !ok {
		return false
	}
	eps := make([]discoveryv1.Endpoint, len(s.eps))
	copy(eps, s.eps)
	text, all := string(s.text), make([]string, len(s.ends))
	from := 0
	for i, end := range s.ends {
		all[i], from = text[from:end], end
	}
	for i, sp := range s.spans {
		if sp.set {
			eps[i].Addresses = all[sp.from:sp.to:sp.to]
		}
	}
	clear(s.eps) // the scratch holds no pointer into the result
	*dst = eps
	return true
}

func scanEndpoint(c *jsonscan.Cursor, s *epScratch, i int) bool {
	e := &s.eps[i]
	return scanMembers(c, func(name []byte) (uint, bool) {
		switch string(name) {
		case "addresses":
			return 1, scanAddresses(c, s, i)
		case "conditions":
			return 2, scanConditions(c, &e.Conditions)
		case "hostname":
			return 4, scanStrPtr(c, &e.Hostname)
		case "targetRef":
			e.TargetRef = &corev1.ObjectReference{}
			return 8, scanObjectRef(c, e.TargetRef)
		case "nodeName":
			return 16, scanStrPtr(c, &e.NodeName)
		case "zone":
			return 32, scanStrPtr(c, &e.Zone)
		case "hints":
			e.Hints = &discoveryv1.EndpointHints{}
			return 64, scanHints(c, e.Hints)
		case "deprecatedTopology":
			e.DeprecatedTopology = map[string]string{}
			return 128, scanStringMap(c, e.DeprecatedTopology)
		}
		return 0, false
	})
}

// scanAddresses reads endpoint i's addresses into the scratch.
func scanAddresses(c *jsonscan.Cursor, s *epScratch, i int) bool {
	from := len(s.ends)
	ok := scanElements(c, func() bool {
		a, ok := c.Str()
		s.text = append(s.text, a...)
		s.ends = append(s.ends, len(s.text))
		return ok
	})
	s.spans[i] = addrSpan{from: from, to: len(s.ends), set: true}
	return ok
}

// scanConditions reads the three conditions; their values share one
// allocation.
func scanConditions(c *jsonscan.Cursor, cond *discoveryv1.EndpointConditions) bool {
	var vals *[3]bool
	set := func(i int, dst **bool) bool {
		v, ok := c.Bool()
		if vals == nil {
			vals = new([3]bool)
		}
		vals[i] = v
		*dst = &vals[i]
		return ok
	}
	return scanMembers(c, func(name []byte) (uint, bool) {
		switch string(name) {
		case "ready":
			return 1, set(0, &cond.Ready)
		case "serving":
			return 2, set(1, &cond.Serving)
		case "terminating":
			return 4, set(2, &cond.Terminating)
		}
		return 0, false
	})
}

func scanObjectRef(c *jsonscan.Cursor, r *corev1.ObjectReference) bool {
	return scanMembers(c, func(name []byte) (uint, bool) {
		switch string(name) {
		case "kind":
			return 1, scanStr(c, &r.Kind)
		case "namespace":
			return 2, scanStr(c, &r.Namespace)
		case "name":
			return 4, scanStr(c, &r.Name)
		case "uid":
			return 8, scanStr(c, (*string)(&r.UID))
		case "apiVersion":
			return 16, scanStr(c, &r.APIVersion)
		case "resourceVersion":
			return 32, scanStr(c, &r.ResourceVersion)
		case "fieldPath":
			return 64, scanStr(c, &r.FieldPath)
		}
		return 0, false
	})
}

func scanHints(c *jsonscan.Cursor, h *discoveryv1.EndpointHints) bool {
	return scanMembers(c, func(name []byte) (uint, bool) {
		switch string(name) {
		case "forZones":
			h.ForZones = []discoveryv1.ForZone{}
			return 1, scanElements(c, func() bool {
				h.ForZones = append(h.ForZones, discoveryv1.ForZone{})
				return scanOnlyName(c, &h.ForZones[len(h.ForZones)-1].Name)
			})
		case "forNodes":
			h.ForNodes = []discoveryv1.ForNode{}
			return 2, scanElements(c, func() bool {
				h.ForNodes = append(h.ForNodes, discoveryv1.ForNode{})
				return scanOnlyName(c, &h.ForNodes[len(h.ForNodes)-1].Name)
			})
		}
		return 0, false
	})
}

// scanOnlyName reads {"name": "..."}.
func scanOnlyName(c *jsonscan.Cursor, dst *string) bool {
	return scanMembers(c, func(name []byte) (uint, bool) {
		if string(name) == "name" {
			return 1, scanStr(c, dst)
		}
		return 0, false
	})
}

func scanPorts(c *jsonscan.Cursor, dst *[]discoveryv1.EndpointPort) bool {
	ps := []discoveryv1.EndpointPort{}
	ok := scanElements(c, func() bool {
		var p discoveryv1.EndpointPort
		ok := scanMembers(c, func(name []byte) (uint, bool) {
			switch string(name) {
			case "name":
				return 1, scanStrPtr(c, &p.Name)
			case "protocol":
				return 2, scanStrPtr(c, &p.Protocol)
			case "port":
				v, ok := c.Int(32)
				n := int32(v)
				p.Port = &n
				return 4, ok
			case "appProtocol":
				return 8, scanStrPtr(c, &p.AppProtocol)
			}
			return 0, false
		})
		ps = append(ps, p)
		return ok
	})
	*dst = ps
	return ok
}
