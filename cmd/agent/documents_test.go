package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/netdrift/netdrift/internal/testutil/fixture"
)

// TestOfflineDocuments: diff and snapshot write the same document with
// -o yaml as with -o json, with apiVersion netdrift.io/v1 and their kind;
// -o wide is a table, as is the default.
func TestOfflineDocuments(t *testing.T) {
	bin := selfBinary(t)
	td := fixture.Dir() + "/"
	for _, c := range []struct {
		kind string
		args []string
		code int
	}{
		{"DiffReport", []string{"diff", "--node", "worker-a", "--cluster", td + "stale.cluster.json", "--iptables-save", td + "stale.worker-a.iptables-save"}, 1},
		{"SnapshotReport", []string{"snapshot", "--iptables-save", td + "worker-a.iptables-save"}, 0},
	} {
		docs := map[string]map[string]any{}
		for _, format := range []string{"json", "yaml"} {
			out, errs, code := runBin(t, bin, append(c.args, "-o", format)...)
			if code != c.code {
				t.Fatalf("%s -o %s: exit %d: %s", c.args[0], format, code, errs)
			}
			j := []byte(out)
			if format == "yaml" {
				var err error
				if j, err = yaml.YAMLToJSON(j); err != nil {
					t.Fatal(err)
				}
			}
			var doc map[string]any
			if err := json.Unmarshal(j, &doc); err != nil {
				t.Fatalf("%s -o %s: %v", c.args[0], format, err)
			}
			if doc["apiVersion"] != "netdrift.io/v1" || doc["kind"] != c.kind {
				t.Errorf("%s -o %s: apiVersion %v kind %v", c.args[0], format, doc["apiVersion"], doc["kind"])
			}
			docs[format] = doc
		}
		if !reflect.DeepEqual(docs["json"], docs["yaml"]) {
			t.Errorf("%s: -o yaml and -o json differ", c.args[0])
		}
		table, _, tcode := runBin(t, bin, c.args...)
		wide, errs, wcode := runBin(t, bin, append(c.args, "-o", "wide")...)
		if wcode != c.code || tcode != c.code || !strings.HasPrefix(wide, strings.SplitN(table, "\n", 2)[0]) {
			t.Errorf("%s -o wide: exit %d (table %d), stderr %q, first line %q", c.args[0], wcode, tcode, errs, strings.SplitN(wide, "\n", 2)[0])
		}
	}
}
