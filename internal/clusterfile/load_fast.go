package clusterfile

import (
	"bytes"
	"cmp"
	"errors"
	"io"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/netdrift/netdrift/internal/watch"
)

// The fast decoding: the reference implementation of encoding/json/v2 in
// its v1 mode (DefaultOptionsV1: encoding/json's semantics, case-insensitive
// names, duplicate names and invalid UTF-8 allowed) over a streaming
// jsontext.Decoder. A List's items are decoded as they are read, each in
// one pass as the kind of the item before it (load_guess.go), where
// encoding/json scans the file seven times. Its error messages are not
// encoding/json's, so Load never returns them: on any error it
// decodes again with stdDecoding. FuzzLoadFastMatchesStd checks that the
// two agree.
//
// One v1 option is off: ReportErrorsWithLegacySemantics. Under it every
// Unmarshal first scans the whole value to check its syntax (encoding/json
// does that too), then decodes it: each item was read twice, half of the
// load's CPU. Without it a malformed value fails part-way, and only errors
// change: where the legacy mode would go on past a type error and return
// it at the end, this one returns at once, and an ambiguous case-insensitive
// name is an error instead of the first field's. Any error sends the file
// to stdDecoding, so what a file loads to is unchanged.
var v1Options = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsonv1.ReportErrorsWithLegacySemantics(false))

func unmarshalV1(data []byte, v any) error { return jsonv2.Unmarshal(data, v, v1Options) }

// loadFast is load with the fast decoding.
func loadFast(data []byte) (*watch.ClusterState, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' && trimmed[0] != '[' {
		return load(data, "", addDocumentFast) // YAML documents
	}
	if cs, ok := loadScan(data); ok {
		return cs, nil
	}
	cs, err := loadJSONStream(data)
	if err != nil {
		return nil, err
	}
	return mergeStates([]*watch.ClusterState{cs}), nil
}

var (
	errNotObject     = errors.New("not an object")
	errNoObjects     = errors.New("no objects")
	errItemsNotArray = errors.New("items is not an array")
)

// loadJSONStream decodes each JSON value of data straight from the stream
// (no copy first); one that is no List is decoded again as one object.
func loadJSONStream(data []byte) (*watch.ClusterState, error) {
	dec := newStreamDecoder(data)
	cs := &watch.ClusterState{}
	for n := 0; ; n++ {
		switch dec.PeekKind() {
		case '{':
		case 0: // the end, or an error
			if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
				return nil, cmp.Or(err, errNotObject)
			}
			if n == 0 {
				return nil, errNoObjects
			}
			return cs, nil
		default:
			return nil, errNotObject
		}
		start := dec.InputOffset()
		l := fastList{Items: fastItems{src: data}}
		if err := jsonv2.UnmarshalDecode(dec, &l, v1Options); err != nil {
			return nil, err
		}
		if !isList(l.Kind) {
			if err := addObject(cs, data[start:dec.InputOffset()], unmarshalV1); err != nil {
				return nil, err
			}
			continue
		}
		l.Items.appendTo(cs)
	}
}

// newStreamDecoder reads src in place (a bytes.Buffer is not copied), so
// its offsets index src.
func newStreamDecoder(src []byte) *jsontext.Decoder {
	return jsontext.NewDecoder(bytes.NewBuffer(src), streamOptions...)
}

var streamOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// fastList is typeMeta with the items decoded as they are read.
type fastList struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Items      fastItems `json:"items"`
}

// fastItems holds the objects of a List's items, in the order read.
type fastItems struct {
	src  []byte // what the decoder reads, from its first byte
	cs   watch.ClusterState
	last string // the kind of the item before
}

// UnmarshalJSONFrom takes an array (or null) as []json.RawMessage does; a
// repeated "items" name replaces the earlier items, as it does there.
func (it *fastItems) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	*it = fastItems{src: it.src}
	switch dec.PeekKind() {
	case 'n':
		_, err := dec.ReadToken()
		return err
	case '[':
	default:
		return errItemsNotArray
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for dec.PeekKind() != ']' {
		if err := it.add(dec); err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}

// add decodes the next item as addObject does: straight from the stream
// when it is of the kind of the item before, else from its bytes (those
// the guess consumed: an item that is not what it guessed is read whole).
func (it *fastItems) add(dec *jsontext.Decoder) error {
	var raw []byte
	if start := dec.InputOffset(); it.last != "" && it.src != nil {
		if addGuessed(&it.cs, it.last, func(g any) error { return jsonv2.UnmarshalDecode(dec, g, v1Options) }) {
			return nil
		}
		raw = bytes.TrimLeft(it.src[start:dec.InputOffset()], " \t\r\n,")
	} else {
		v, err := dec.ReadValue()
		if err != nil {
			return err
		}
		raw = v
	}
	if !isJSONObject(raw) {
		return errNotObject
	}
	var tm typeMeta
	if err := unmarshalV1(raw, &tm); err != nil {
		return err
	}
	it.last = tm.Kind
	return addObject(&it.cs, bytes.Clone(raw), unmarshalV1)
}

func (it *fastItems) appendTo(cs *watch.ClusterState) {
	cs.Services = append(cs.Services, it.cs.Services...)
	cs.EndpointSlices = append(cs.EndpointSlices, it.cs.EndpointSlices...)
	cs.Nodes = append(cs.Nodes, it.cs.Nodes...)
	cs.Pods = append(cs.Pods, it.cs.Pods...)
}

// addDocumentFast is addDocument with the fast decoding (YAML documents).
func addDocumentFast(cs *watch.ClusterState, raw []byte) error {
	if !isJSONObject(raw) {
		return errNotObject
	}
	l := fastList{Items: fastItems{src: raw}}
	if err := jsonv2.UnmarshalDecode(newStreamDecoder(raw), &l, v1Options); err != nil {
		return err
	}
	if !isList(l.Kind) {
		return addObject(cs, raw, unmarshalV1)
	}
	l.Items.appendTo(cs)
	return nil
}
