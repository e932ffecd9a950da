package watch

import (
	"bytes"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/netdrift/netdrift/internal/jsonscan"
)

// The scan decoding: a cluster file as kubectl prints it (one JSON List)
// is read with internal/jsonscan. Its EndpointSlices — most of the bytes
// of any real cluster file, ten endpoints a slice and more — and its
// Services are read member by member into the API types without
// reflection (load_scan_slice.go, load_scan_service.go); every other item
// is decoded alone from the stream, as the fast decoding decodes one.
//
// The scan reads an item only as encoding/json would: a member it does not
// know, a repeated one, an escape in a string, a null, a number that is
// not a plain integer sends that item to the decoder instead; a malformed
// List ends the scan and loadFast decodes the file as before. So a refusal
// never changes a result (FuzzLoadScanMatchesStd). What it reads it reads
// strictly and what it hands over is decoded by a validating decoder: it
// accepts no file encoding/json rejects.
//
// At 10k endpoints (the lab's 5.3 MB cluster file) the fast decoding's
// reflection over the slices and Services was most of the offline diff's
// cluster load (BENCHMARKS.md, "Offline diff").

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
	st := &itemScan{}
	for i := 0; ; i++ {
		more, ok := c.Next(']', i)
		if !ok {
			return false
		}
		if !more {
			return true
		}
		if !st.item(c, cs) {
			return false
		}
	}
}

// itemScan is the state of a List's items being read.
type itemScan struct {
	last    string // the kind of the item before: kubectl groups items by kind
	misses  int    // items of that kind in a row the scan did not read
	scanned int    // items the scan read
	decoded int    // items the decoder read
	slices  epScratch
	dec     *jsontext.Decoder
}

// maxMisses: after this many items of a kind in a row that the scan did
// not read, the items of that kind go straight to the decoder. When the
// file's first items are such, the scan gives the file up (a file with
// managed fields, or of Pods only, say): the fast decoding reads it as
// one stream, without a decoder set up for every item.
const maxMisses = 4

// item reads an EndpointSlice or a Service field by field; any other
// item, or one the scan does not read, is decoded from the stream as the
// fast decoding decodes one: as the kind of the item before, else as the
// kind it names.
func (st *itemScan) item(c *jsonscan.Cursor, cs *ClusterState) bool {
	if st.misses < maxMisses {
		at := *c
		switch st.last {
		case "", "EndpointSlice":
			if o, ok := scanEndpointSlice(c, &st.slices); ok {
				cs.EndpointSlices = append(cs.EndpointSlices, o)
				st.last, st.misses = "EndpointSlice", 0
				st.scanned++
				return true
			}
			*c = at
		}
		switch st.last {
		case "", "Service":
			if o, ok := scanService(c); ok {
				cs.Services = append(cs.Services, o)
				st.last, st.misses = "Service", 0
				st.scanned++
				return true
			}
			*c = at
		}
	}
	if st.decoded++; st.scanned == 0 && st.decoded > maxMisses {
		return false // given up: loadFast decodes the file
	}
	kind, ok := st.decode(c, cs)
	if kind == st.last && (kind == "EndpointSlice" || kind == "Service") {
		st.misses++
	} else {
		st.last, st.misses = kind, 0
	}
	return ok
}

// decode decodes the item at c from the stream (as fastItems.add does,
// without reading it twice), and returns its kind.
func (st *itemScan) decode(c *jsonscan.Cursor, cs *ClusterState) (string, bool) {
	src := c.Rest()
	if st.dec == nil {
		st.dec = newStreamDecoder(src)
	} else {
		st.dec.Reset(bytes.NewBuffer(src), streamOptions...)
	}
	if dec := st.dec; st.last != "" && dec.PeekKind() == '{' &&
		addGuessed(cs, st.last, func(g any) error { return jsonv2.UnmarshalDecode(dec, g, v1Options) }) {
		c.Advance(int(dec.InputOffset()))
		return st.last, true
	}
	if st.last == "" { // nothing read yet
		if _, err := st.dec.ReadValue(); err != nil {
			return "", false
		}
	}
	n := int(st.dec.InputOffset())
	raw := bytes.TrimLeft(src[:n], " \t\r\n")
	c.Advance(n)
	if !isJSONObject(raw) {
		return "", false
	}
	decode := func(g any) error { return unmarshalV1(raw, g) }
	k := itemKind(raw)
	if k != "" && k != st.last && addGuessed(cs, k, decode) {
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
