package watch

import (
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/netdrift/netdrift/internal/jsonscan"
)

// The scan decoding: a cluster file as kubectl prints it (one JSON List)
// is read with internal/jsonscan, its EndpointSlices — most of the bytes
// of any real cluster file, ten endpoints a slice and more — field by
// field without reflection (load_scan_slice.go), every other item found by
// its brackets and decoded alone as the fast decoding decodes it. It
// accepts only what it reads exactly as encoding/json would: a member it
// does not know, a repeated one, an escape in a string, a null, a number
// that is not a plain integer, anything unexpected ends it, and loadFast
// decodes the file as before, so a refusal never changes a result
// (FuzzLoadScanMatchesStd). What it reads it reads strictly, and the items
// it hands over are decoded by a validating decoder: it accepts no file
// encoding/json rejects.
//
// At 10k endpoints (the lab's 5.3 MB cluster file) the fast decoding's
// reflection over the slices was most of the offline diff's cluster load
// (BENCHMARKS.md, "Offline diff").

// loadScan is loadFast for one JSON List; false: not read, decode it as
// before.
func loadScan(data []byte) (*ClusterState, bool) {
	c := jsonscan.New(data)
	if !c.Lit('{') {
		return nil, false
	}
	cs := &ClusterState{}
	var kind []byte
	var seen uint
	for i := 0; ; i++ {
		more, ok := c.Next('}', i)
		if !ok {
			return nil, false
		}
		if !more {
			break
		}
		name, ok := c.Member()
		if !ok {
			return nil, false
		}
		var bit uint
		switch string(name) {
		case "apiVersion":
			bit = 1
			_, ok = c.Str()
		case "kind":
			bit = 2
			kind, ok = c.Str()
		case "metadata": // a List's: {"resourceVersion": ""}
			bit = 4
			ok = scanStringMap(&c, nil)
		case "items":
			bit = 8
			ok = scanItems(&c, cs)
		default:
			return nil, false
		}
		if !ok || seen&bit != 0 {
			return nil, false
		}
		seen |= bit
	}
	if !c.End() || seen&8 == 0 || !isList(string(kind)) {
		return nil, false
	}
	return mergeStates([]*ClusterState{cs}), true
}

func scanItems(c *jsonscan.Cursor, cs *ClusterState) bool {
	if !c.Lit('[') {
		return false
	}
	last := "" // the kind of the item before: kubectl groups items by kind
	s := &epScratch{}
	for i := 0; ; i++ {
		more, ok := c.Next(']', i)
		if !ok {
			return false
		}
		if !more {
			return true
		}
		if last, ok = scanItem(c, s, cs, last); !ok {
			return false
		}
	}
}

// scanItem reads an EndpointSlice field by field; any other item, or a
// slice the scan does not read, is decoded alone as the fast decoding
// decodes one: as the kind of the item before (last), else as the kind it
// names. It returns the item's kind.
func scanItem(c *jsonscan.Cursor, s *epScratch, cs *ClusterState, last string) (string, bool) {
	const slice = "EndpointSlice"
	if last == "" || last == slice {
		at := *c
		if o, ok := scanEndpointSlice(c, s); ok {
			cs.EndpointSlices = append(cs.EndpointSlices, o)
			return slice, true
		}
		*c = at
	}
	if last == "" || last == "Service" {
		at := *c
		if o, ok := scanService(c); ok {
			cs.Services = append(cs.Services, o)
			return "Service", true
		}
		*c = at
	}
	raw, ok := c.Value()
	if !ok || !isJSONObject(raw) {
		return "", false
	}
	decode := func(g any) error { return unmarshalV1(raw, g) }
	if last != "" && addGuessed(cs, last, decode) {
		return last, true
	}
	k := itemKind(raw)
	if k != "" && k != last && addGuessed(cs, k, decode) {
		return k, true
	}
	return k, addObject(cs, raw, unmarshalV1) == nil
}

// itemKind is the value of an object's "kind" member when the object is
// plain enough to find it (its other members passed over); "" otherwise.
func itemKind(raw []byte) string {
	c := jsonscan.New(raw)
	if !c.Lit('{') {
		return ""
	}
	for i := 0; ; i++ {
		more, ok := c.Next('}', i)
		if !ok || !more {
			return ""
		}
		name, ok := c.Member()
		if !ok {
			return ""
		}
		if string(name) == "kind" {
			k, _ := c.Str()
			return string(k)
		}
		if !c.Skip() {
			return ""
		}
	}
}

// stringMap reads an object of strings into m (nil: read only).
func scanStringMap(c *jsonscan.Cursor, m map[string]string) bool {
	if !c.Lit('{') {
		return false
	}
	for i := 0; ; i++ {
		more, ok := c.Next('}', i)
		if !ok {
			return false
		}
		if !more {
			return true
		}
		k, ok := c.Member()
		if !ok {
			return false
		}
		v, ok := c.Str()
		if !ok {
			return false
		}
		if m != nil {
			if _, dup := m[string(k)]; dup {
				return false
			}
			m[string(k)] = string(v)
		}
	}
}

// scanEndpointSlice reads an EndpointSlice as addObject would decode it, or
// returns false.
func scanEndpointSlice(c *jsonscan.Cursor, s *epScratch) (*discoveryv1.EndpointSlice, bool) {
	o := &discoveryv1.EndpointSlice{}
	ok := scanMembers(c, func(name []byte) (uint, bool) {
		switch string(name) {
		case "kind":
			return 1, scanStr(c, &o.Kind)
		case "apiVersion":
			return 2, scanStr(c, &o.APIVersion)
		case "metadata":
			return 4, scanObjectMeta(c, &o.ObjectMeta)
		case "addressType":
			return 8, scanStr(c, (*string)(&o.AddressType))
		case "endpoints":
			return 16, scanEndpoints(c, s, &o.Endpoints)
		case "ports":
			return 32, scanPorts(c, &o.Ports)
		}
		return 0, false
	})
	if !ok || o.Kind != "EndpointSlice" || o.APIVersion != wantedKinds["EndpointSlice"] || o.Name == "" {
		return nil, false
	}
	return o, true
}

// members reads an object, calling member for each member name: it reads
// the value and returns the member's bit (each name once) and whether it
// read it.
func scanMembers(c *jsonscan.Cursor, member func(name []byte) (uint, bool)) bool {
	if !c.Lit('{') {
		return false
	}
	var seen uint
	for i := 0; ; i++ {
		more, ok := c.Next('}', i)
		if !ok {
			return false
		}
		if !more {
			return true
		}
		name, ok := c.Member()
		if !ok {
			return false
		}
		bit, ok := member(name)
		if !ok || bit == 0 || seen&bit != 0 {
			return false
		}
		seen |= bit
	}
}

// elements reads an array, calling elem for each element.
func scanElements(c *jsonscan.Cursor, elem func() bool) bool {
	if !c.Lit('[') {
		return false
	}
	for i := 0; ; i++ {
		more, ok := c.Next(']', i)
		if !ok {
			return false
		}
		if !more {
			return true
		}
		if !elem() {
			return false
		}
	}
}

func scanStr(c *jsonscan.Cursor, dst *string) bool {
	s, ok := c.Str()
	*dst = string(s)
	return ok
}

// strPtr reads a string into a new *string.
func scanStrPtr[T ~string](c *jsonscan.Cursor, dst **T) bool {
	s, ok := c.Str()
	v := T(s)
	*dst = &v
	return ok
}
