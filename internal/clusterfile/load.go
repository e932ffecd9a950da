package clusterfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/netdrift/netdrift/internal/watch"
)

// LoadFiles reads files as `kubectl get services,endpointslices,nodes,pods
// -A -o json|yaml` prints them and merges them. An object present in several
// files (same kind, namespace and name) is taken from the last file. A path
// "-" is standard input (once); gzip'd files are read as they are
// (ReadInput).
func LoadFiles(paths ...string) (*watch.ClusterState, error) {
	if len(paths) == 0 {
		return nil, errors.New("no cluster files given")
	}
	if stdinCount(paths) > 1 {
		return nil, errors.New("--cluster - given more than once: standard input is one input (save the other cluster files to files)")
	}
	var parts []*watch.ClusterState
	for _, p := range paths {
		data, err := ReadInput(p, "--cluster")
		if err != nil {
			return nil, err
		}
		cs, err := Load(data, InputName(p))
		if err != nil {
			return nil, err
		}
		parts = append(parts, cs)
	}
	if len(parts) == 1 {
		return parts[0], nil // Load's result is merged already
	}
	return mergeStates(parts), nil
}

func stdinCount(paths []string) int {
	n := 0
	for _, p := range paths {
		if p == Stdin {
			n++
		}
	}
	return n
}

// Load parses one file's contents: a v1 List (or any *List) or a
// single object, as JSON (one or more concatenated values) or YAML (one or
// more documents). Services, EndpointSlices, Nodes and Pods are kept; other
// kinds are ignored. Errors name the file, the document's line and the item.
//
// It decodes with the fast decoding (load_fast.go) and, when that fails,
// again with encoding/json, whose errors (and so messages) it returns.
func Load(data []byte, name string) (*watch.ClusterState, error) {
	if cs, err := loadFast(data); err == nil {
		return cs, nil
	}
	return load(data, name, stdDecoding)
}

// decoding decodes one document (a JSON value) into cs.
type decoding func(cs *watch.ClusterState, raw []byte) error

// stdDecoding is encoding/json: the reference, and the source of errors.
func stdDecoding(cs *watch.ClusterState, raw []byte) error {
	return addDocument(cs, raw, json.Unmarshal)
}

func load(data []byte, name string, decode decoding) (*watch.ClusterState, error) {
	docs, err := splitDocuments(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("%s: no Kubernetes objects found", name)
	}
	cs := &watch.ClusterState{}
	for i, d := range docs {
		if err := decode(cs, d.json); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", name, d.where(i, len(docs)), err)
		}
	}
	return mergeStates([]*watch.ClusterState{cs}), nil
}

// typeMeta is what every object and list starts with.
type typeMeta struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"`
}

func addDocument(cs *watch.ClusterState, raw []byte, unmarshal func([]byte, any) error) error {
	if !isJSONObject(raw) {
		return errors.New("expected a Kubernetes object (a map with apiVersion and kind)")
	}
	var tm typeMeta
	if err := unmarshal(raw, &tm); err != nil {
		return err
	}
	if !isList(tm.Kind) {
		return addObject(cs, raw, unmarshal)
	}
	for i, item := range tm.Items {
		if err := addObject(cs, item, unmarshal); err != nil {
			return fmt.Errorf("items[%d]: %w", i, err)
		}
	}
	return nil
}

func isList(kind string) bool {
	return len(kind) >= 4 && kind[len(kind)-4:] == "List"
}

func isJSONObject(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// addObject decodes one item by kind; kinds netdrift does not use are ignored.
func addObject(cs *watch.ClusterState, raw []byte, unmarshal func([]byte, any) error) error {
	if !isJSONObject(raw) {
		return errors.New("expected an object")
	}
	var tm typeMeta
	if err := unmarshal(raw, &tm); err != nil {
		return err
	}
	if tm.Kind == "" {
		return errors.New("object has no kind")
	}
	want, ok := wantedKinds[tm.Kind]
	if !ok {
		return nil
	}
	if tm.APIVersion != want {
		return fmt.Errorf("%s has apiVersion %q, want %q", tm.Kind, tm.APIVersion, want)
	}
	return decodeKind(cs, tm.Kind, raw, unmarshal)
}

var wantedKinds = map[string]string{
	"Service":       "v1",
	"Node":          "v1",
	"Pod":           "v1",
	"EndpointSlice": "discovery.k8s.io/v1",
}

func decodeKind(cs *watch.ClusterState, kind string, raw []byte, unmarshal func([]byte, any) error) error {
	var err error
	var name string
	switch kind {
	case "Service":
		o := &corev1.Service{}
		if err = unmarshal(raw, o); err == nil {
			cs.Services, name = append(cs.Services, o), o.Name
		}
	case "EndpointSlice":
		o := &discoveryv1.EndpointSlice{}
		if err = unmarshal(raw, o); err == nil {
			cs.EndpointSlices, name = append(cs.EndpointSlices, o), o.Name
		}
	case "Node":
		o := &corev1.Node{}
		if err = unmarshal(raw, o); err == nil {
			cs.Nodes, name = append(cs.Nodes, o), o.Name
		}
	case "Pod":
		o := &corev1.Pod{}
		if err = unmarshal(raw, o); err == nil {
			cs.Pods, name = append(cs.Pods, o), o.Name
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	if name == "" {
		return fmt.Errorf("%s has no metadata.name", kind)
	}
	return nil
}

// mergeStates unions states; a later object with the same kind, namespace
// and name replaces an earlier one. Output is sorted by namespace and name.
func mergeStates(parts []*watch.ClusterState) *watch.ClusterState {
	svcs := map[string]*corev1.Service{}
	slices := map[string]*discoveryv1.EndpointSlice{}
	nodes := map[string]*corev1.Node{}
	pods := map[string]*corev1.Pod{}
	for _, p := range parts {
		for _, o := range p.Services {
			svcs[o.Namespace+"/"+o.Name] = o
		}
		for _, o := range p.EndpointSlices {
			slices[o.Namespace+"/"+o.Name] = o
		}
		for _, o := range p.Nodes {
			nodes[o.Name] = o
		}
		for _, o := range p.Pods {
			pods[o.Namespace+"/"+o.Name] = o
		}
	}
	return &watch.ClusterState{
		Services:       sortedValues(svcs),
		EndpointSlices: sortedValues(slices),
		Nodes:          sortedValues(nodes),
		Pods:           sortedValues(pods),
	}
}

func sortedValues[T any](m map[string]*T) []*T {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*T, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}
