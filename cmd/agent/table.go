package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
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
