package deploy_test

// The NodeReport CRD (crds/netdrift.io_nodereports.yaml) and its Go type
// (internal/report/types.go) agree field by field and type by type; the chart renders the
// same CRD; the chart's own-node admission policies and node-signal RBAC follow its values.

import (
	"bytes"
	"reflect"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/netdrift/netdrift/internal/report"
)

const crdFile = "crds/netdrift.io_nodereports.yaml"

func crdOf(t *testing.T) map[string]any {
	t.Helper()
	var crd map[string]any
	if err := yaml.Unmarshal(readFile(t, crdFile), &crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

func digPath(m map[string]any, keys ...any) any {
	var v any = m
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			mm, _ := v.(map[string]any)
			v = mm[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// schemaFields flattens an openAPI schema into field path -> type ("report.findings[].kind":
// "string"; a map's values are "{}").
func schemaFields(prefix string, s map[string]any, out map[string]string) {
	typ, _ := s["type"].(string)
	out[prefix] = typ
	switch typ {
	case "object":
		props, _ := s["properties"].(map[string]any)
		for name, p := range props {
			schemaFields(join(prefix, name), p.(map[string]any), out)
		}
		if ap, ok := s["additionalProperties"].(map[string]any); ok {
			schemaFields(prefix+"{}", ap, out)
		}
	case "array":
		schemaFields(prefix+"[]", s["items"].(map[string]any), out)
	}
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

var timeType = reflect.TypeOf(metav1.Time{})

// goFields flattens a Go type into the same form by its JSON tags.
func goFields(prefix string, t reflect.Type, out map[string]string) {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType:
		out[prefix] = "string"
	case t.Kind() == reflect.Struct:
		out[prefix] = "object"
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			if name == "" && f.Anonymous { // inline (TypeMeta)
				goFields(prefix, f.Type, out)
				out[prefix] = "object"
				continue
			}
			if f.Type == reflect.TypeOf(metav1.ObjectMeta{}) {
				out[join(prefix, name)] = "object" // the API server's own schema
				continue
			}
			goFields(join(prefix, name), f.Type, out)
		}
	case t.Kind() == reflect.Slice:
		out[prefix] = "array"
		goFields(prefix+"[]", t.Elem(), out)
	case t.Kind() == reflect.Map:
		out[prefix] = "object"
		goFields(prefix+"{}", t.Elem(), out)
	case t.Kind() == reflect.String:
		out[prefix] = "string"
	case t.Kind() == reflect.Bool:
		out[prefix] = "boolean"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		out[prefix] = "integer"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		out[prefix] = "number"
	default:
		out[prefix] = "unsupported " + t.String()
	}
}

func TestCRDSchemaMatchesTheGoType(t *testing.T) {
	crd := crdOf(t)
	if digPath(crd, "spec", "group") != report.Group || digPath(crd, "spec", "scope") != "Cluster" ||
		digPath(crd, "spec", "names", "kind") != report.Kind || digPath(crd, "spec", "names", "plural") != report.Resource ||
		digPath(crd, "spec", "names", "listKind") != report.ListKind || digPath(crd, "spec", "versions", 0, "name") != report.Version ||
		digPath(crd, "metadata", "name") != report.Resource+"."+report.Group {
		t.Fatalf("CRD coordinates differ from internal/report's: %v", crd["spec"])
	}
	schema, _ := digPath(crd, "spec", "versions", 0, "schema", "openAPIV3Schema").(map[string]any)
	if schema == nil {
		t.Fatal("no openAPIV3Schema")
	}
	fromSchema, fromGo := map[string]string{}, map[string]string{}
	schemaFields("", schema, fromSchema)
	goFields("", reflect.TypeOf(report.NodeReport{}), fromGo)
	var missing, extra, typed []string
	for p, typ := range fromGo {
		st, ok := fromSchema[p]
		switch {
		case !ok:
			missing = append(missing, p)
		case st != typ:
			typed = append(typed, p+": schema "+st+", Go "+typ)
		}
	}
	for p := range fromSchema {
		if _, ok := fromGo[p]; !ok {
			extra = append(extra, p)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	sort.Strings(typed)
	if len(missing)+len(extra)+len(typed) > 0 {
		t.Fatalf("%s and internal/report/types.go differ:\n in Go, not in the schema: %v\n in the schema, not in Go: %v\n types: %v", crdFile, missing, extra, typed)
	}
	if len(fromGo) < 40 {
		t.Fatalf("only %d fields compared: the walk missed the type", len(fromGo))
	}
	// Every printer column points at a schema field of its type.
	cols, _ := digPath(crd, "spec", "versions", 0, "additionalPrinterColumns").([]any)
	var names []string
	for _, c := range cols {
		c := c.(map[string]any)
		names = append(names, c["name"].(string))
		field := strings.TrimPrefix(c["jsonPath"].(string), ".")
		want := c["type"].(string)
		if want == "date" {
			want = "string"
		}
		if fromSchema[field] != want {
			t.Errorf("printer column %s: %s is %q in the schema, the column says %s", c["name"], field, fromSchema[field], c["type"])
		}
	}
	if strings.Join(names, ",") != "Datapath,View current,Findings,Pending,Heartbeat age,Version" {
		t.Errorf("printer columns %v", names)
	}
}

// The schema's bound on listed findings and --node-report-max-findings' bound agree.
func TestCRDFindingsBoundIsTheFlags(t *testing.T) {
	schema := digPath(crdOf(t), "spec", "versions", 0, "schema", "openAPIV3Schema").(map[string]any)
	max := int(digPath(schema, "properties", "report", "properties", "findings", "maxItems").(float64))
	if p := report.DefaultPolicy(); p.MaxFindings > max {
		t.Errorf("the default --node-report-max-findings %d exceeds the schema's maxItems %d", p.MaxFindings, max)
	}
	if (report.Policy{Heartbeat: 60e9, MinInterval: 1e9, MaxFindings: max + 1}).Validate() == nil {
		t.Errorf("--node-report-max-findings %d is accepted; the schema allows %d", max+1, max)
	}
}

// The chart's copy of the CRD is the file, and renders (with the chart's labels) as it.
func TestChartCRDIsTheFile(t *testing.T) {
	if !bytes.Equal(readFile(t, chartDir+"/files/netdrift.io_nodereports.yaml"), readFile(t, crdFile)) {
		t.Fatalf("%s/files/netdrift.io_nodereports.yaml differs from %s: copy it", chartDir, crdFile)
	}
	var rendered map[string]any
	for _, o := range docs(t, renderChart(t, "-f", plainValuesFile)) {
		if o["kind"] == "CustomResourceDefinition" {
			rendered = o
		}
	}
	if rendered == nil {
		t.Fatal("the plain manifests carry no CRD")
	}
	delete(rendered["metadata"].(map[string]any), "labels")
	if want := crdOf(t); !reflect.DeepEqual(rendered, want) {
		t.Error("the rendered CRD differs from the file")
	}
	if k := kindsOf(docs(t, renderChart(t, "--set", "nodeReport.installCRD=false"))); k["CustomResourceDefinition"] != 0 {
		t.Error("nodeReport.installCRD=false still renders the CRD")
	}
}

func policiesOf(objs []map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, o := range objs {
		if o["kind"] == "ValidatingAdmissionPolicy" || o["kind"] == "ValidatingAdmissionPolicyBinding" {
			out[o["kind"].(string)+"/"+digPath(o, "metadata", "name").(string)] = o
		}
	}
	return out
}

func clusterRules(objs []map[string]any, name string) string {
	for _, o := range objs {
		if o["kind"] == "ClusterRole" && digPath(o, "metadata", "name") == name {
			b, _ := yaml.Marshal(o["rules"])
			return string(b)
		}
	}
	return ""
}

// Defaults: the NodeReport policy and RBAC; no condition or events. Each toggle brings its
// RBAC, its policy and binding, and its flag; nodeReport.enabled=false removes all of it.
func TestChartNodeReportToggles(t *testing.T) {
	def := docs(t, renderChart(t))
	pol := policiesOf(def)
	if len(pol) != 2 || pol["ValidatingAdmissionPolicy/netdrift-nodereport-own-node"] == nil ||
		digPath(pol["ValidatingAdmissionPolicyBinding/netdrift-nodereport-own-node"], "spec", "policyName") != "netdrift-nodereport-own-node" {
		t.Fatalf("default policies %v", sortedKeys(pol))
	}
	if a := strings.Join(daemonSetOf(t, renderChart(t)).Spec.Template.Spec.Containers[0].Args, " "); strings.Contains(a, "--node-report") || strings.Contains(a, "--node-condition") || strings.Contains(a, "--node-events") {
		t.Errorf("default args %q set node report flags (the agent's defaults hold)", a)
	}
	on := docs(t, renderChart(t, "--set", "nodeCondition.enabled=true,nodeEvents.enabled=true,nodeReport.heartbeat=5m,nodeReport.minInterval=1m,nodeReport.maxFindings=0"))
	pol = policiesOf(on)
	for _, n := range []string{"nodereport", "node-condition", "node-events"} {
		if pol["ValidatingAdmissionPolicy/netdrift-"+n+"-own-node"] == nil || pol["ValidatingAdmissionPolicyBinding/netdrift-"+n+"-own-node"] == nil {
			t.Errorf("toggles on: no %s policy and binding (%v)", n, sortedKeys(pol))
		}
	}
	cond := pol["ValidatingAdmissionPolicy/netdrift-node-condition-own-node"]
	if mc, _ := yaml.Marshal(digPath(cond, "spec", "matchConditions")); !strings.Contains(string(mc), "system:serviceaccount:netdrift:netdrift") {
		t.Errorf("the node condition policy matches %s; want only the agent's ServiceAccount (the node controller patches conditions too)", mc)
	}
	rules := clusterRules(on, "netdrift-node-signals")
	if !strings.Contains(rules, "nodes/status") || !strings.Contains(rules, "events.k8s.io") || strings.Contains(rules, "delete") {
		t.Errorf("node-signals rules:\n%s", rules)
	}
	args := strings.Join(daemonSetOf(t, renderChart(t, "--set", "nodeCondition.enabled=true,nodeEvents.enabled=true,nodeReport.heartbeat=5m,nodeReport.minInterval=1m,nodeReport.maxFindings=0")).Spec.Template.Spec.Containers[0].Args, " ")
	for _, a := range []string{"--node-condition", "--node-events", "--node-report-heartbeat=5m", "--node-report-min-interval=1m", "--node-report-max-findings=0"} {
		if !strings.Contains(args, a) {
			t.Errorf("args %q lack %s", args, a)
		}
	}
	off := renderChart(t, "--set", "nodeReport.enabled=false")
	if k := kindsOf(docs(t, off)); k["ValidatingAdmissionPolicy"]+k["CustomResourceDefinition"] != 0 || strings.Contains(clusterRules(docs(t, off), "netdrift"), "nodereports") {
		t.Errorf("nodeReport.enabled=false: %v", k)
	}
	if a := strings.Join(daemonSetOf(t, off).Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(a, "--node-report=false") {
		t.Errorf("nodeReport.enabled=false: args %q", a)
	}
}
