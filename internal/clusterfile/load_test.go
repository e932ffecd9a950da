package clusterfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/watch"
)

const yamlList = `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Service
  metadata:
    name: web
    namespace: ns
  spec:
    clusterIP: 10.96.0.1
    clusterIPs: [10.96.0.1]
    ports:
    - name: http
      port: 80
      protocol: TCP
- apiVersion: discovery.k8s.io/v1
  kind: EndpointSlice
  metadata:
    name: web-1
    namespace: ns
    labels:
      kubernetes.io/service-name: web
  addressType: IPv4
  endpoints:
  - addresses: [10.1.0.1]
    nodeName: node-a
  ports:
  - name: http
    port: 8080
    protocol: TCP
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: ignored
    namespace: ns
metadata:
  resourceVersion: ""
`

const multiDoc = `# a comment before the first document
---
apiVersion: v1
kind: Node
metadata:
  name: node-a
  labels:
    topology.kubernetes.io/zone: za
---
apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: ns
status:
  podIP: 10.1.0.1
---
# empty document
...
--- 
apiVersion: v1
kind: ServiceList
items:
- apiVersion: v1
  kind: Service
  metadata: {name: s2, namespace: ns}
  spec: {clusterIP: 10.96.0.2}
`

type counts struct{ svcs, slices, nodes, pods int }

func countOf(cs *watch.ClusterState) counts {
	return counts{len(cs.Services), len(cs.EndpointSlices), len(cs.Nodes), len(cs.Pods)}
}

func TestLoadCluster(t *testing.T) {
	cases := []struct {
		name string
		data string
		want counts
	}{
		{"json_v1_list", `{"apiVersion":"v1","kind":"List","items":[
			{"apiVersion":"v1","kind":"Service","metadata":{"name":"a","namespace":"ns"},"spec":{"clusterIP":"10.96.0.1"}},
			{"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"a","namespace":"ns"}},
			{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}]}`, counts{1, 0, 1, 0}},
		{"json_single_object", `{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"a-1","namespace":"ns"},"addressType":"IPv4","endpoints":[]}`,
			counts{0, 1, 0, 0}},
		{"json_concatenated_objects", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}
			{"apiVersion":"v1","kind":"Node","metadata":{"name":"n2"}}`, counts{0, 0, 2, 0}},
		{"json_empty_list", `{"apiVersion":"v1","kind":"List","items":[]}`, counts{}},
		{"yaml_list", yamlList, counts{1, 1, 0, 0}},
		{"yaml_single_object", "apiVersion: v1\nkind: Node\nmetadata:\n  name: node-1\n", counts{0, 0, 1, 0}},
		{"yaml_multi_document", multiDoc, counts{1, 0, 1, 1}},
		{"ignored_kind_only", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n", counts{}},
		{"utf8_bom", "\xef\xbb\xbf" + `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}`, counts{0, 0, 1, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cs, err := Load([]byte(c.data), "f")
			if err != nil {
				t.Fatal(err)
			}
			if got := countOf(cs); got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestLoadClusterYAMLContent(t *testing.T) {
	cs, err := Load([]byte(yamlList), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := watch.Expected("node-a", cs)
	got := summary(d, "ns")
	want := "ns/web:http cluster_ip 10.96.0.1:80/TCP -> forward 10.1.0.1:8080"
	if len(got) != 1 || got[0] != want {
		t.Errorf("got %q, want %q", got, want)
	}
	cs, err = Load([]byte(multiDoc), "m.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cs.Nodes[0].Labels["topology.kubernetes.io/zone"] != "za" || cs.Pods[0].Status.PodIP != "10.1.0.1" {
		t.Errorf("decoded wrongly: %+v %+v", cs.Nodes[0].Labels, cs.Pods[0].Status)
	}
}

func TestLoadClusterErrors(t *testing.T) {
	cases := []struct {
		name string
		data string
		want []string // substrings of the error
	}{
		{"empty_file", "", []string{"bad.json", "no Kubernetes objects"}},
		{"only_comments", "# nothing\n---\n", []string{"no Kubernetes objects"}},
		{"garbage_binary", "\x00\x01\x02\xff", []string{"bad.json"}},
		{"scalar_yaml", "hello world\n", []string{"bad.json", "line 1", "expected a Kubernetes object"}},
		{"json_array", `[1,2,3]`, []string{"expected a Kubernetes object"}},
		{"json_syntax_error_line", "{\"apiVersion\":\"v1\",\n\"kind\":\"List\",\n\"items\":[}\n", []string{"line 3", "invalid JSON"}},
		{"json_truncated", `{"apiVersion":"v1","kind":"List","items":[`, []string{"line 1", "unexpected end"}},
		{"yaml_syntax_error_line", "apiVersion: v1\nkind: Node\nmetadata:\n  name: [unclosed\n", []string{"line"}},
		{"yaml_error_in_second_document", "apiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\nkind: Node\n  bad: indent\n", []string{"document at line 5", "line 6"}},
		{"missing_kind", `{"apiVersion":"v1","metadata":{"name":"x"}}`, []string{"no kind"}},
		{"item_missing_kind", `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":"a"}},{"metadata":{"name":"x"}}]}`,
			[]string{"items[1]", "no kind"}},
		{"item_wrong_type", `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Service","metadata":{"name":"a"},"spec":{"ports":"nope"}}]}`,
			[]string{"items[0]", "Service"}},
		{"item_not_object", `{"apiVersion":"v1","kind":"List","items":[42]}`, []string{"items[0]", "expected an object"}},
		{"items_not_array", `{"apiVersion":"v1","kind":"List","items":{}}`, []string{"bad.json"}},
		{"wrong_api_version", `{"apiVersion":"discovery.k8s.io/v1beta1","kind":"EndpointSlice","metadata":{"name":"a"}}`,
			[]string{"apiVersion", "discovery.k8s.io/v1"}},
		{"object_without_name", `{"apiVersion":"v1","kind":"Service","metadata":{}}`, []string{"no metadata.name"}},
		{"second_document_error_names_document", "apiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\n",
			[]string{"document 2 (line 5)", "no metadata.name"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load([]byte(c.data), "bad.json")
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestLoadClusterFiles(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.yaml")
	b := filepath.Join(dir, "b.json")
	write(t, a, "apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: ns}\nspec: {clusterIP: 10.96.0.1}\n")
	write(t, b, `{"apiVersion":"v1","kind":"List","items":[
		{"apiVersion":"v1","kind":"Service","metadata":{"name":"s","namespace":"ns"},"spec":{"clusterIP":"10.96.0.9"}},
		{"apiVersion":"v1","kind":"Service","metadata":{"name":"r","namespace":"ns"},"spec":{"clusterIP":"10.96.0.2"}}]}`)
	cs, err := LoadFiles(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.Services) != 2 || cs.Services[0].Name != "r" || cs.Services[1].Spec.ClusterIP != "10.96.0.9" {
		t.Errorf("merge: later file must win and output be sorted; got %d services", len(cs.Services))
	}
	if _, err := LoadFiles(); err == nil {
		t.Error("no files: want error")
	}
	if _, err := LoadFiles(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: %v", err)
	}
	write(t, b, "{garbage")
	if _, err := LoadFiles(a, b); err == nil || !strings.Contains(err.Error(), "b.json") {
		t.Errorf("bad second file: error %v must name it", err)
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
