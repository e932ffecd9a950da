package watch

import (
	"bytes"
	"errors"
	"io"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// fastDecoding uses the reference implementation of encoding/json/v2 in its
// v1 mode (DefaultOptionsV1: encoding/json's semantics, case-insensitive
// names, duplicate names and invalid UTF-8 allowed) and its streaming
// jsontext.Decoder, and decodes a List's items as they are read instead of
// copying each first: a large cluster file in about a third of
// encoding/json's CPU. Its error messages are not encoding/json's, so
// LoadCluster never returns them: on any error it decodes again with
// stdDecoding. FuzzLoadFastMatchesStd checks that the two agree.
var fastDecoding = decoding{splitJSON: splitJSONFast, addDocument: addDocumentFast}

var v1Options = jsonv1.DefaultOptionsV1()

func unmarshalV1(data []byte, v any) error { return jsonv2.Unmarshal(data, v, v1Options) }

// splitJSONFast is splitJSON with jsontext's decoder. Document lines are
// counted as splitJSON counts them.
func splitJSONFast(data []byte) ([]document, error) {
	dec := jsontext.NewDecoder(bytes.NewBuffer(data), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	var docs []document
	for {
		start := dec.InputOffset()
		raw, err := dec.ReadValue()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		line := lineAt(data, start+int64(countLeadingSpace(data[start:])))
		docs = append(docs, document{json: bytes.Clone(raw), line: line})
	}
}

// fastList is typeMeta with the items decoded (addObject) as they are read.
type fastList struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Items      fastItems `json:"items"`
}

// fastItems holds the objects of a List's items, in the order read.
type fastItems struct{ cs ClusterState }

var errItemsNotArray = errors.New("items is not an array")

// UnmarshalJSONFrom takes an array (or null) as []json.RawMessage does; a
// repeated "items" name replaces the earlier items, as it does there.
func (it *fastItems) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	it.cs = ClusterState{}
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
		raw, err := dec.ReadValue()
		if err != nil {
			return err
		}
		if err := addObject(&it.cs, bytes.Clone(raw), unmarshalV1); err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}

// addDocumentFast is addDocument; a document that is no List is decoded
// again as one object (its "items", if any, were decoded for nothing).
func addDocumentFast(cs *ClusterState, raw []byte) error {
	if !isJSONObject(raw) {
		return errors.New("expected a Kubernetes object")
	}
	var l fastList
	if err := unmarshalV1(raw, &l); err != nil {
		return err
	}
	if !isList(l.Kind) {
		return addObject(cs, raw, unmarshalV1)
	}
	cs.Services = append(cs.Services, l.Items.cs.Services...)
	cs.EndpointSlices = append(cs.EndpointSlices, l.Items.cs.EndpointSlices...)
	cs.Nodes = append(cs.Nodes, l.Items.cs.Nodes...)
	cs.Pods = append(cs.Pods, l.Items.cs.Pods...)
	return nil
}
