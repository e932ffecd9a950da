package clusterfile

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/netdrift/netdrift/internal/jsonscan"
)

// richSlice is an EndpointSlice as kubectl prints one, with every member
// the scan reads.
const richSlice = `{
    "addressType": "IPv4",
    "apiVersion": "discovery.k8s.io/v1",
    "endpoints": [
        {
            "addresses": ["10.244.1.5", "10.244.1.6"],
            "conditions": {"ready": false, "serving": true, "terminating": true},
            "hints": {"forNodes": [{"name": "node-a"}], "forZones": [{"name": "zone-a"}, {"name": "zone-b"}]},
            "hostname": "web-0",
            "nodeName": "node-a",
            "targetRef": {"apiVersion": "v1", "fieldPath": "spec", "kind": "Pod", "name": "web-0", "namespace": "shop",
                "resourceVersion": "12", "uid": "9f1c"},
            "zone": "zone-a",
            "deprecatedTopology": {"kubernetes.io/hostname": "node-a"}
        },
        {"addresses": [], "conditions": {}},
        {"addresses": ["10.244.2.7"], "conditions": {"ready": true}, "hints": {"forZones": []}}
    ],
    "kind": "EndpointSlice",
    "metadata": {
        "annotations": {"endpoints.kubernetes.io/last-change-trigger-time": "2026-12-04T22:10:24.744751933Z"},
        "creationTimestamp": "2026-12-04T22:10:24Z",
        "generateName": "web-",
        "generation": 3,
        "labels": {"endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io", "kubernetes.io/service-name": "web"},
        "name": "web-x7k2p",
        "namespace": "shop",
        "ownerReferences": [{"apiVersion": "v1", "blockOwnerDeletion": true, "controller": true, "kind": "Service", "name": "web", "uid": "77ab"}],
        "resourceVersion": "4821",
        "uid": "c0ffee"
    },
    "ports": [{"appProtocol": "http", "name": "http", "port": 8080, "protocol": "TCP"}, {"port": -1}, {}]
}`

const plainService = `{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"shop"},` +
	`"spec":{"clusterIP":"10.96.0.10","ports":[{"name":"http","port":80,"protocol":"TCP","targetPort":8080}]}}`

// richService is a Service as kubectl prints one, with every member the
// scan reads.
const richService = `{
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"creationTimestamp": "2026-11-29T18:17:57Z", "labels": {"app": "web"}, "name": "web", "namespace": "shop",
        "resourceVersion": "250", "uid": "1d2e"},
    "spec": {
        "allocateLoadBalancerNodePorts": true,
        "clusterIP": "10.96.0.10",
        "clusterIPs": ["10.96.0.10", "fd00::a"],
        "externalIPs": ["192.0.2.7"],
        "externalName": "",
        "externalTrafficPolicy": "Local",
        "healthCheckNodePort": 31999,
        "internalTrafficPolicy": "Cluster",
        "ipFamilies": ["IPv4", "IPv6"],
        "ipFamilyPolicy": "PreferDualStack",
        "loadBalancerClass": "example.com/lb",
        "loadBalancerIP": "192.0.2.8",
        "loadBalancerSourceRanges": ["198.51.100.0/24"],
        "ports": [
            {"appProtocol": "http", "name": "http", "nodePort": 30080, "port": 80, "protocol": "TCP", "targetPort": 8080},
            {"name": "metrics", "port": 9090, "protocol": "TCP", "targetPort": "metrics"},
            {"port": 53, "protocol": "UDP"}
        ],
        "publishNotReadyAddresses": false,
        "selector": {"app": "web"},
        "sessionAffinity": "ClientIP",
        "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}},
        "trafficDistribution": "PreferClose",
        "type": "LoadBalancer"
    },
    "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.8", "ipMode": "VIP"}, {"hostname": "lb.example.com"}]}}
}`

func scanList(items ...string) string {
	return `{"apiVersion": "v1", "items": [` + strings.Join(items, ",\n") + `], "kind": "List", "metadata": {"resourceVersion": ""}}`
}

// TestScanEndpointSliceDecodesAsTheDecoder: every member the scan reads
// comes out as the decoder makes it (pointers, empty slices and maps).
func TestScanEndpointSliceDecodesAsTheDecoder(t *testing.T) {
	c := jsonscan.New([]byte(richSlice))
	got, ok := scanEndpointSlice(&c, &epScratch{})
	if !ok || !c.End() {
		t.Fatal("the scan refused a slice it reads")
	}
	var want discoveryv1.EndpointSlice
	if err := json.Unmarshal([]byte(richSlice), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, &want) {
		t.Fatalf("scan:\n%+v\nencoding/json:\n%+v", got, &want)
	}
}

// TestScanServiceDecodesAsTheDecoder: the same for a Service.
func TestScanServiceDecodesAsTheDecoder(t *testing.T) {
	for _, doc := range []string{richService, plainService, `{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "status": {"loadBalancer": {}}}`} {
		c := jsonscan.New([]byte(doc))
		got, ok := scanService(&c)
		if !ok || !c.End() {
			t.Fatalf("the scan refused a Service it reads: %.80s", doc)
		}
		var want corev1.Service
		if err := json.Unmarshal([]byte(doc), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, &want) {
			t.Fatalf("scan:\n%+v\nencoding/json:\n%+v", got, &want)
		}
	}
}

// TestScanReadsRealClusterFiles: kubectl's own output (the repository's
// real captures) is read by the scan, every EndpointSlice field by field,
// to what encoding/json loads.
func TestScanReadsRealClusterFiles(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/kube-proxy-v1.37/*cluster*.json")
	if len(files) == 0 {
		t.Fatal("no captures found")
	}
	for _, f := range append(files, "testdata/small.cluster.json") {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := loadScan(data)
		if !ok {
			t.Fatalf("%s: the scan did not read it", f)
		}
		want, err := load(data, f, stdDecoding)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the scan and encoding/json differ (error %v)", f, err)
		}
		var l struct{ Items []json.RawMessage }
		if err := json.Unmarshal(data, &l); err != nil {
			t.Fatal(err)
		}
		scanned := map[string]int{}
		for _, it := range l.Items {
			c := jsonscan.New(it)
			switch itemKind(it) {
			case "EndpointSlice":
				if !isScanned(&c) {
					t.Errorf("%s: a slice decoded by reflection, not scanned: %.200s", f, it)
				}
			case "Service":
				if _, ok := scanService(&c); !ok || !c.End() {
					t.Errorf("%s: a Service decoded by reflection, not scanned: %.200s", f, it)
				}
			}
			scanned[itemKind(it)]++
		}
		if !strings.Contains(f, "small") && (scanned["EndpointSlice"] == 0 || scanned["Service"] == 0) {
			t.Errorf("%s: no EndpointSlices or Services: %v", f, scanned)
		}
	}
}

func isScanned(c *jsonscan.Cursor) bool {
	_, ok := scanEndpointSlice(c, &epScratch{})
	return ok && c.End()
}

// TestScanRefusesWhatItDoesNotReadExactly: a slice with anything the scan
// does not read as encoding/json would is not scanned, and the file loads
// as encoding/json loads it (or fails as it does).
func TestScanRefusesWhatItDoesNotReadExactly(t *testing.T) {
	for name, c := range map[string]struct{ old, new string }{
		"escape":           {`"name": "web-x7k2p"`, `"name": "web-x7k2\u0070"`},
		"null":             {`"hostname": "web-0"`, `"hostname": null`},
		"repeated_member":  {`"zone": "zone-a"`, `"zone": "zone-a", "zone": "zone-b"`},
		"unknown_member":   {`"zone": "zone-a"`, `"zone": "zone-a", "extra": [1, {"x": null}]`},
		"letter_case":      {`"nodeName": "node-a"`, `"NodeName": "node-a"`},
		"fraction":         {`"port": 8080`, `"port": 8080.0`},
		"exponent":         {`"port": 8080`, `"port": 8e3`},
		"leading_zero":     {`"port": 8080`, `"port": 08080`},
		"port_overflow":    {`"port": 8080`, `"port": 2147483648`},
		"port_string":      {`"port": 8080`, `"port": "8080"`},
		"invalid_utf8":     {`"zone-a"}`, "\"zone-\xff\"}"},
		"control_char":     {`"web-0"`, "\"web\t0\""},
		"bad_time":         {`"2026-12-04T22:10:24Z"`, `"yesterday"`},
		"wrong_version":    {`"discovery.k8s.io/v1"`, `"discovery.k8s.io/v1beta1"`},
		"managed_fields":   {`"generation": 3`, `"generation": 3, "managedFields": [{"manager": "kcm"}]`},
		"unbalanced":       {`"ports": [`, `"ports": [[`},
		"trailing_comma":   {`"kind": "EndpointSlice",`, `"kind": "EndpointSlice",,`},
		"vertical_tab":     {`"kind": "EndpointSlice"`, "\"kind\":\v\"EndpointSlice\""},
		"conditions_array": {`"conditions": {}`, `"conditions": []`},
	} {
		t.Run(name, func(t *testing.T) {
			slice := strings.Replace(richSlice, c.old, c.new, 1)
			if slice == richSlice {
				t.Fatalf("%q not in the slice", c.old)
			}
			if cur := jsonscan.New([]byte(slice)); isScanned(&cur) {
				t.Fatal("scanned a slice it must refuse")
			}
			doc := []byte(scanList(plainService, slice, plainService))
			std, serr := load(doc, "f", stdDecoding)
			if got, ok := loadScan(doc); ok && (serr != nil || !reflect.DeepEqual(got, std)) {
				t.Fatalf("the scan loaded %+v; encoding/json %+v, %v", got, std, serr)
			}
			if got, err := Load(doc, "f"); !reflect.DeepEqual(got, std) || (err == nil) != (serr == nil) {
				t.Fatalf("Load: %v; encoding/json: %v", err, serr)
			}
		})
	}
}

// TestScanRefusesServicesItDoesNotReadExactly: the same for Services.
func TestScanRefusesServicesItDoesNotReadExactly(t *testing.T) {
	for name, c := range map[string]struct{ old, new string }{
		"target_port_float":   {`"targetPort": 8080`, `"targetPort": 8080.5`},
		"target_port_null":    {`"targetPort": 8080`, `"targetPort": null`},
		"condition":           {`"status": {"loadBalancer"`, `"status": {"conditions": [], "loadBalancer"`},
		"affinity_timeout":    {`"timeoutSeconds": 10800`, `"timeoutSeconds": 1e4`},
		"ingress_ports":       {`{"hostname": "lb.example.com"}`, `{"hostname": "lb.example.com", "ports": [{"port": 80, "protocol": "TCP"}]}`},
		"escaped_annotation":  {`"labels": {"app": "web"}`, `"annotations": {"last-applied": "{\"a\":1}"}, "labels": {"app": "web"}`},
		"port_overflow":       {`"port": 53,`, `"port": 4294967349,`},
		"repeated_port_field": {`"port": 53,`, `"port": 53, "port": 54,`},
		"wrong_version":       {`"apiVersion": "v1"`, `"apiVersion": "v2"`},
	} {
		t.Run(name, func(t *testing.T) {
			svc := strings.Replace(richService, c.old, c.new, 1)
			if svc == richService {
				t.Fatalf("%q not in the Service", c.old)
			}
			if cur := jsonscan.New([]byte(svc)); func() bool { _, ok := scanService(&cur); return ok }() {
				t.Fatal("scanned a Service it must refuse")
			}
			doc := []byte(scanList(plainService, svc, richSlice))
			std, serr := load(doc, "f", stdDecoding)
			if got, ok := loadScan(doc); ok && (serr != nil || !reflect.DeepEqual(got, std)) {
				t.Fatalf("the scan loaded %+v; encoding/json %+v, %v", got, std, serr)
			}
			if got, err := Load(doc, "f"); !reflect.DeepEqual(got, std) || (err == nil) != (serr == nil) {
				t.Fatalf("Load: %v; encoding/json: %v", err, serr)
			}
		})
	}
}

// TestScanGivesUpFilesItCannotRead: a file whose first items the scan does
// not read (managed fields on every object, as kubectl prints them with
// --show-managed-fields) is left to the fast decoding whole; a later run of
// such items is decoded item by item. Either way the state is encoding/json's.
func TestScanGivesUpFilesItCannotRead(t *testing.T) {
	managed := strings.Replace(richSlice, `"generation": 3`, `"generation": 3, "managedFields": [{"manager": "kcm", "operation": "Update"}]`, 1)
	odd := func(n int) []string {
		items := make([]string, n)
		for i := range items {
			items[i] = strings.Replace(managed, "web-x7k2p", fmt.Sprintf("web-%d", i), 1)
		}
		return items
	}
	for name, c := range map[string]struct {
		items []string
		read  bool
	}{
		"all_managed":          {odd(maxMisses + 3), false},
		"managed_after_others": {append([]string{plainService, richSlice}, odd(maxMisses+3)...), true},
		"pods_only":            {slices.Repeat([]string{`{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}`}, maxMisses+2), false},
	} {
		t.Run(name, func(t *testing.T) {
			doc := []byte(scanList(c.items...))
			got, ok := loadScan(doc)
			if ok != c.read {
				t.Fatalf("scan read the file: %v, want %v", ok, c.read)
			}
			std, err := load(doc, "f", stdDecoding)
			if err != nil {
				t.Fatal(err)
			}
			if ok && !reflect.DeepEqual(got, std) {
				t.Fatal("the scan and encoding/json differ")
			}
			if all, err := Load(doc, "f"); err != nil || !reflect.DeepEqual(all, std) {
				t.Fatalf("Load: %v", err)
			}
		})
	}
}

// FuzzLoadScanMatchesStd: whatever the scan reads, encoding/json loads,
// to the same state.
func FuzzLoadScanMatchesStd(f *testing.F) {
	for _, s := range loaderSeeds() {
		f.Add(s)
	}
	f.Add([]byte(scanList(richSlice, plainService, richSlice)))
	f.Add([]byte(scanList(richService, richSlice, plainService)))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := loadScan(data)
		if !ok {
			return
		}
		std, err := load(data, "fuzz", stdDecoding)
		if err != nil {
			t.Fatalf("the scan read what encoding/json rejects: %v", err)
		}
		if !reflect.DeepEqual(got, std) {
			t.Fatal("the scan and encoding/json loaded different states")
		}
	})
}
