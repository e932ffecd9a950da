package clusterfile

import (
	"bytes"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netdrift/netdrift/internal/jsonscan"

	"github.com/netdrift/netdrift/internal/watch"
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
// List ends the scan and loadFast decodes the whole file with the decoder. So a refusal
// never changes a result (FuzzLoadScanMatchesStd). What it reads it reads
// strictly and what it hands over is decoded by a validating decoder: it
// accepts no file encoding/json rejects.
//
// The fast decoding's reflection over the slices and Services is most of
// the offline diff's cluster load without the scan (see BENCHMARKS.md,
// Offline diff).

// loadScan is loadFast for one JSON List; false: not read, decode it as
// before.
func loadScan(data []byte) (*watch.ClusterState, bool) {
	c := jsonscan.New(data)
	cs := &watch.ClusterState{}
	var kind []byte
	items := false
	ok := scanMembers(&c, func(name []byte) (uint, bool) {
		switch string(name) {
		case "apiVersion":
			_, ok := c.Str()
			return 1, ok
		case "kind":
			k, ok := c.Str()
			kind = k
			return 2, ok
		case "metadata": // a List's: {"resourceVersion": ""}
			return 4, scanStringMap(&c, nil)
		case "items":
			items = true
			return 8, scanItems(&c, cs)
		}
		return 0, false
	})
	if !ok || !c.End() || !items || !isList(string(kind)) {
		return nil, false
	}
	return mergeStates([]*watch.ClusterState{cs}), true
}

func scanItems(c *jsonscan.Cursor, cs *watch.ClusterState) bool {
	st := &itemScan{}
	return c.Each('[', func() bool { return st.item(c, cs) })
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
func (st *itemScan) item(c *jsonscan.Cursor, cs *watch.ClusterState) bool {
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
func (st *itemScan) decode(c *jsonscan.Cursor, cs *watch.ClusterState) (string, bool) {
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
	var kind []byte
	scanEachMember(&c, func(name []byte) bool {
		if string(name) == "kind" {
			kind, _ = c.Str()
			return false // found: stop
		}
		return c.Skip()
	})
	return string(kind)
}

// scanStringMap reads an object of strings into m (nil: read only).
func scanStringMap(c *jsonscan.Cursor, m map[string]string) bool {
	return scanEachMember(c, func(k []byte) bool {
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
		return true
	})
}

// scanEndpointSlice reads an EndpointSlice as addObject would decode it, or
// returns false.
func scanEndpointSlice(c *jsonscan.Cursor, s *epScratch) (*discoveryv1.EndpointSlice, bool) {
	o := &discoveryv1.EndpointSlice{}
	ok := scanObject(c, "EndpointSlice", &o.TypeMeta, &o.ObjectMeta, func(name []byte) (uint, bool) {
		switch string(name) {
		case "addressType":
			return 8, scanStr(c, (*string)(&o.AddressType))
		case "endpoints":
			return 16, scanEndpoints(c, s, &o.Endpoints)
		case "ports":
			return 32, scanPorts(c, &o.Ports)
		}
		return 0, false
	})
	return o, ok
}

// scanObject reads an API object of kind: its type and metadata, and
// every other member through member (bits from 8 up). It is false unless
// the object is one addObject adds (kind, apiVersion, a name).
func scanObject(c *jsonscan.Cursor, kind string, tm *metav1.TypeMeta, om *metav1.ObjectMeta, member func(name []byte) (uint, bool)) bool {
	ok := scanMembers(c, func(name []byte) (uint, bool) {
		switch string(name) {
		case "kind":
			return 1, scanStr(c, &tm.Kind)
		case "apiVersion":
			return 2, scanStr(c, &tm.APIVersion)
		case "metadata":
			return 4, scanObjectMeta(c, om)
		}
		return member(name)
	})
	return ok && tm.Kind == kind && tm.APIVersion == wantedKinds[kind] && om.Name != ""
}

// scanEachMember reads an object, calling member with each member's name
// to read its value; false where member refuses or the object is malformed.
func scanEachMember(c *jsonscan.Cursor, member func(name []byte) bool) bool {
	return c.Each('{', func() bool {
		name, ok := c.Member()
		return ok && member(name)
	})
}

// scanMembers reads an object of known members: member reads the value of
// the one it is given and returns its bit (each name once, 0 for a name
// it does not know) and whether it read it.
func scanMembers(c *jsonscan.Cursor, member func(name []byte) (uint, bool)) bool {
	var seen uint
	return scanEachMember(c, func(name []byte) bool {
		bit, ok := member(name)
		if !ok || bit == 0 || seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	})
}

// scanElements reads an array, calling elem for each element.
func scanElements(c *jsonscan.Cursor, elem func() bool) bool { return c.Each('[', elem) }

func scanStr(c *jsonscan.Cursor, dst *string) bool {
	s, ok := c.Str()
	*dst = string(s)
	return ok
}

// scanStrPtr reads a string into a new *T.
func scanStrPtr[T ~string](c *jsonscan.Cursor, dst **T) bool {
	s, ok := c.Str()
	v := T(s)
	*dst = &v
	return ok
}
