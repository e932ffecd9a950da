package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// APIVersion is the apiVersion of every document netdrift writes: the
// HTTP API's answers and the CLI's -o json and -o yaml.
const APIVersion = "netdrift.io/v1"

// Version is `netdrift version -o json`: the build of the binary.
type Version struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"go_version"`
	BuildDate string `json:"build_date"`
	Platform  string `json:"platform"`
}

// KindOf is the kind of a document type, "" for a value that is none (an
// error body, say).
func KindOf(v any) string {
	switch v.(type) {
	case Status, *Status:
		return "Status"
	case Drift, *Drift:
		return "Drift"
	case ServiceView, *ServiceView:
		return "ServiceView"
	case Lag, *Lag:
		return "Lag"
	case RSTReport, *RSTReport:
		return "RSTReport"
	case DiffReport, *DiffReport:
		return "DiffReport"
	case SnapshotReport, *SnapshotReport:
		return "SnapshotReport"
	case Version, *Version:
		return "Version"
	}
	return ""
}

// Document is a value written with apiVersion and kind ahead of its own
// members, so that a reader can tell what it reads. The types stay plain
// structs: the two members are added here, once, for every kind.
type Document struct {
	Kind   string
	Object any
}

// Typed is v as a document of its kind (KindOf).
func Typed(v any) Document { return Document{Kind: KindOf(v), Object: v} }

// MarshalJSON writes {"apiVersion":..., "kind":..., <v's members>}; v must
// encode as a JSON object. HTML characters stay as they are (evidence
// holds "->" and "<").
func (d Document) MarshalJSON() ([]byte, error) {
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d.Object); err != nil {
		return nil, err
	}
	b := bytes.TrimSpace(body.Bytes())
	if len(b) < 2 || b[0] != '{' {
		return nil, fmt.Errorf("api: a %s document must be a JSON object, not %.20s", d.Kind, b)
	}
	head, err := json.Marshal(struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}{APIVersion, d.Kind})
	if err != nil {
		return nil, err
	}
	rest := bytes.TrimSpace(b[1:])
	if len(rest) == 1 { // "}": no members of its own
		return head, nil
	}
	return append(append(head[:len(head)-1], ','), rest...), nil
}

// EncodeJSON writes v, as a document when it has a kind, indented by two
// spaces, HTML characters as they are.
func EncodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if KindOf(v) != "" {
		return enc.Encode(Typed(v))
	}
	return enc.Encode(v)
}
