// Package findingtest renders findings compactly for test assertions, one
// scheme for every package's tests.
package findingtest

import (
	"slices"

	"github.com/netdrift/netdrift/internal/model"
)

// IDs renders service findings as sorted "kind service frontend-kind
// frontend/proto backend" lines.
func IDs(fs []model.Finding) []string {
	var out []string
	for _, f := range fs {
		s := string(f.Kind) + " " + f.Service.String()
		if f.Frontend != nil {
			s += " " + string(f.Frontend.Kind) + " " + f.Frontend.String() + "/" + string(f.Frontend.Protocol)
		}
		if f.Backend.IsValid() {
			s += " " + f.Backend.String()
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Kinds renders node-level findings as "kind subject" lines, in order.
func Kinds(fs []model.Finding) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, string(f.Kind)+" "+f.Subject)
	}
	return out
}
