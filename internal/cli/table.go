// Package cli holds netdrift's responder commands: the queries of a running
// agent (status, drift, explain, lag, rsts), the offline analysis of captures
// (diff, snapshot) and trace-rsts. Tables for people, -o json|yaml for tools.
package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Exit statuses: 0 ok / no findings, 1 findings, 2 error, 3 no view (the
// agent answered, but without a current view of the cluster or the
// datapath: its answer says nothing about the node).
const (
	ExitOK       = 0
	ExitFindings = 1
	ExitError    = 2
	ExitNoView   = 3
)

// table prints aligned columns; cells longer than max are shortened in the
// middle with "…" (the start and end of a name tell it apart) so tables stay
// readable at 100 columns. Two different cells of a column never shorten to
// the same text: the column is widened until they differ.
type table struct {
	rows   [][]string
	max    []int
	middle map[int]bool // columns of names: shortened in the middle, kept distinct
}

func newTable(header ...string) *table { return &table{rows: [][]string{header}} }

func (t *table) limit(max ...int) *table { t.max = max; return t }

// names marks columns that hold names (services, addresses): a long one is
// shortened in the middle, and two never shorten to the same text. Other
// columns (prose) are cut at the end.
func (t *table) names(cols ...int) *table {
	t.middle = map[int]bool{}
	for _, c := range cols {
		t.middle[c] = true
	}
	return t
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) {
	t.keepDistinct()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(t.cut(r), "\t"))
	}
	_ = tw.Flush()
}

// shorten cuts s to max runes by replacing its middle with "…".
func shorten(s string, max int) string {
	r := []rune(s)
	if max <= 0 || len(r) <= max {
		return s
	}
	if max < 3 {
		return string(r[:max])
	}
	head := (max - 1 + 1) / 2
	tail := max - 1 - head
	return string(r[:head]) + "…" + string(r[len(r)-tail:])
}

// shortenCell fits cell c of column col to its limit.
func (t *table) shortenCell(col int, c string) string {
	max := t.max[col]
	if max <= 0 || len([]rune(c)) <= max {
		return c
	}
	if t.middle[col] {
		return shorten(c, max)
	}
	return string([]rune(c)[:max-1]) + "…"
}

// keepDistinct widens each limited column until no two different cells of
// it (data rows) shorten to the same text.
func (t *table) keepDistinct() {
	for i := range t.max {
		if t.max[i] <= 0 || !t.middle[i] {
			continue
		}
		longest := 0
		for _, r := range t.rows[1:] {
			if i < len(r) && len(r) > 1 {
				if n := len([]rune(r[i])); n > longest {
					longest = n
				}
			}
		}
		for t.max[i] < longest && t.collides(i) {
			t.max[i]++
		}
	}
}

func (t *table) collides(col int) bool {
	seen := map[string]string{}
	for _, r := range t.rows[1:] {
		if col >= len(r) || len(r) == 1 {
			continue
		}
		short := t.shortenCell(col, r[col])
		if orig, ok := seen[short]; ok && orig != r[col] {
			return true
		}
		seen[short] = r[col]
	}
	return false
}

// writeSpanning is write, but a row with a single cell is printed as is,
// outside the columns (for a detail line under a row).
func (t *table) writeSpanning(w io.Writer) {
	t.keepDistinct()
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
			for _, line := range wrap(r[0], 99, "    ") {
				fmt.Fprintln(w, line)
			}
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
		if i < len(t.max) {
			c = t.shortenCell(i, c)
		}
		out[i] = c
	}
	return out
}

// wrap breaks a line at spaces into lines of at most width runes, the
// continuation lines indented; a word longer than a line stays whole.
func wrap(line string, width int, indent string) []string {
	var out []string
	body := strings.TrimLeft(line, " ")
	lead := line[:len(line)-len(body)]
	cur := ""
	for _, word := range strings.Split(body, " ") {
		switch {
		case cur == "":
			cur = lead + word
		case len([]rune(cur))+1+len([]rune(word)) <= width:
			cur += " " + word
		default:
			out = append(out, cur)
			cur = indent + word
		}
	}
	return append(out, cur)
}
