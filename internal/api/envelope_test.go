package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/api"
)

// TestDocumentEnvelope: apiVersion and kind come first, the value's own
// members follow unchanged, < and > stay as they are; a value that is no
// JSON object is refused; a value of no kind is written as it is.
func TestDocumentEnvelope(t *testing.T) {
	var buf bytes.Buffer
	if err := api.EncodeJSON(&buf, api.DiffReport{Node: "n", Datapath: "iptables", Findings: []api.Finding{}, Warnings: []string{"a -> <b>"}}); err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"apiVersion\": \"netdrift.io/v1\",\n  \"kind\": \"DiffReport\",\n  \"node\": \"n\",\n  \"datapath\": \"iptables\",\n  \"findings\": [],\n  \"warnings\": [\n    \"a -> <b>\"\n  ]\n}\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
	if _, err := json.Marshal(api.Document{Kind: "Status", Object: []int{1}}); err == nil {
		t.Error("a list as a document: no error")
	}
	if b, err := json.Marshal(api.Document{Kind: "Version", Object: struct{}{}}); err != nil || string(b) != `{"apiVersion":"netdrift.io/v1","kind":"Version"}` {
		t.Errorf("empty object: %s %v", b, err)
	}
	buf.Reset()
	_ = api.EncodeJSON(&buf, map[string]string{"error": "x"})
	if strings.Contains(buf.String(), "apiVersion") {
		t.Errorf("an error body got a kind: %s", buf.String())
	}
}

// TestClientRefusesOtherKind: the client refuses an answer of another kind
// than it decodes, and takes one without a kind.
func TestClientRefusesOtherKind(t *testing.T) {
	body := `{"apiVersion":"netdrift.io/v1","kind":"Lag","node":"n"}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(body)) }))
	defer srv.Close()
	var s api.Status
	if err := api.NewClient(srv.URL).Get(context.Background(), "/v1/status", &s); err == nil || !strings.Contains(err.Error(), "answered a Lag, not a Status") {
		t.Errorf("a Lag for a Status: %v", err)
	}
	body = `{"node":"n"}`
	if err := api.NewClient(srv.URL).Get(context.Background(), "/v1/status", &s); err != nil || s.Node != "n" {
		t.Errorf("no kind: %v %+v", err, s)
	}
}
