// Package cli holds netdrift's responder commands: the queries of a running
// agent (status, drift, explain, lag, rsts), the offline analysis of captures
// (diff, snapshot) and trace-rsts. Tables for people, -o json for tools.
package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Exit statuses: 0 ok / no findings, 1 findings, 2 error.
const (
	ExitOK       = 0
	ExitFindings = 1
	ExitError    = 2
)

// table prints aligned columns; cells longer than max are cut with "…" so
// tables stay readable at 100 columns.
type table struct {
	rows [][]string
	max  []int
}

func newTable(header ...string) *table { return &table{rows: [][]string{header}} }

func (t *table) limit(max ...int) *table { t.max = max; return t }

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range t.rows {
		out := make([]string, len(r))
		for i, c := range r {
			if i < len(t.max) && t.max[i] > 0 && len([]rune(c)) > t.max[i] {
				c = string([]rune(c)[:t.max[i]-1]) + "…"
			}
			out[i] = c
		}
		fmt.Fprintln(tw, strings.Join(out, "\t"))
	}
	_ = tw.Flush()
}

func printJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func checkOutput(o string) error {
	if o != "table" && o != "json" {
		return fmt.Errorf("-o must be table or json, not %q", o)
	}
	return nil
}

// writeSpanning is write, but a row with a single cell is printed as is,
// outside the columns (for a detail line under a row).
func (t *table) writeSpanning(w io.Writer) {
	// Align all multi-cell rows together: compute widths once.
	widths := make([]int, len(t.rows[0]))
	for _, r := range t.rows {
		if len(r) == 1 {
			continue
		}
		for i, c := range t.cut(r) {
			if n := len([]rune(c)); i < len(widths) && n > widths[i] {
				widths[i] = n
			}
		}
	}
	for _, r := range t.rows {
		if len(r) == 1 {
			line := r[0]
			if len([]rune(line)) > 99 {
				line = string([]rune(line)[:98]) + "…"
			}
			fmt.Fprintln(w, line)
			continue
		}
		cells := t.cut(r)
		var b strings.Builder
		for i, c := range cells {
			if i == len(cells)-1 {
				b.WriteString(c)
				break
			}
			b.WriteString(c + strings.Repeat(" ", widths[i]-len([]rune(c))+2))
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

func (t *table) cut(r []string) []string {
	out := make([]string, len(r))
	for i, c := range r {
		if i < len(t.max) && t.max[i] > 0 && len([]rune(c)) > t.max[i] {
			c = string([]rune(c)[:t.max[i]-1]) + "…"
		}
		out[i] = c
	}
	return out
}
