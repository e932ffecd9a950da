// Package cli holds netdrift's responder commands: the queries of a running
// agent (status, drift, explain, lag, rsts), the offline analysis of captures
// (diff, snapshot) and trace-rsts. Tables for people, -o json|yaml for tools.
package cli

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
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
// the same text: the column is widened until they differ. A table that
// shortened a cell says so under it, and how to see every cell whole (-o
// wide, which shortens nothing, or -o json).
type table struct {
	rows   [][]string
	max    []int
	middle map[int]bool // columns of names: shortened in the middle, kept distinct
	cuts   int          // cells shortened by the last write
}

// cutNote is the line under a table that shortened cells.
const cutNote = "(… marks cells cut to fit 100 columns: -o wide or -o json shows them whole)"

// moreNote is what a list or table that shows only some of its items
// prints: how many are not shown ("more backends", "earlier samples"), and
// how to see them all.
func moreNote(n int, what string) string {
	return fmt.Sprintf("… (+%d %s; -o wide or -o json shows all)", n, what)
}

func newTable(header ...string) *table { return &table{rows: [][]string{header}} }

// limit sets the columns' widths; wide (-o wide) keeps every cell whole.
func (t *table) limit(max ...int) *table { t.max = max; return t }

// wide drops the limits when on (-o wide): nothing is cut.
func (t *table) wide(on bool) *table {
	if on {
		t.max = nil
	}
	return t
}

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
	t.cuts = 0
	for i, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(t.cutRow(r, i > 0), "\t"))
	}
	_ = tw.Flush()
	t.sayCuts(w)
}

// sayCuts prints cutNote when the last write shortened a cell.
func (t *table) sayCuts(w io.Writer) {
	if t.cuts > 0 {
		fmt.Fprintln(w, cutNote)
	}
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
		for i, c := range t.cutRow(r, false) {
			if n := len([]rune(c)); i < len(widths) && n > widths[i] {
				widths[i] = n
			}
		}
	}
	t.cuts = 0
	for i, r := range t.rows {
		if len(r) == 1 {
			for _, line := range wrap(r[0], 99, "    ") {
				fmt.Fprintln(w, line)
			}
			continue
		}
		cells := t.cutRow(r, i > 0)
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
	t.sayCuts(w)
}

// cutRow fits a row's cells to their columns, counting the shortened cells
// of data rows when count is set.
func (t *table) cutRow(r []string, count bool) []string {
	out := make([]string, len(r))
	for i, c := range r {
		if i < len(t.max) {
			c = t.shortenCell(i, c)
		}
		if count && c != r[i] {
			t.cuts++
		}
		out[i] = c
	}
	return out
}

// listCell joins items with "," for a cell of at most max runes: as many
// items as fit, then "… (+N more)" (at least the first item is shown);
// all items when max is 0 (-o wide). more is how many were left out.
func listCell(items []string, max int) (cell string, more int) {
	all := strings.Join(items, ",")
	if max <= 0 || len([]rune(all)) <= max {
		return all, 0
	}
	for n := len(items) - 1; n >= 1; n-- {
		c := strings.Join(items[:n], ",") + fmt.Sprintf(",… (+%d more)", len(items)-n)
		if len([]rune(c)) <= max || n == 1 {
			return c, len(items) - n
		}
	}
	return all, 0 // one item: never cut
}

// lastN is the last n items of a list (all of them when wide), and how
// many earlier ones were left out.
func lastN[T any](items []T, n int, wide bool) ([]T, int) {
	if wide || len(items) <= n {
		return items, 0
	}
	return items[len(items)-n:], len(items) - n
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

// duration is how every table prints a duration: Go's compact notation
// (850µs, 35ms, 35.2ms, 7.5s, 12.3s, 2m3s, 1h5m) with three significant
// digits below a minute, whole seconds from a minute, whole minutes from an
// hour, and no trailing zero unit ("2m", not "2m0s"). A negative duration
// keeps its sign.
func duration(d time.Duration) string {
	if d < 0 {
		return "-" + duration(-max(d, -math.MaxInt64)) // -MinInt64 overflows
	}
	switch {
	case d >= time.Hour:
		d = d.Round(time.Minute)
	case d >= time.Minute:
		d = d.Round(time.Second)
	default:
		unit := time.Duration(1)
		for x := d; x >= 1000; x /= 10 {
			unit *= 10
		}
		d = d.Round(unit)
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// seconds is duration for a number of seconds (the API's *_seconds
// fields); "-" for a value that is no duration (NaN, infinite, beyond
// time.Duration's range).
func seconds(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > float64(math.MaxInt64)/float64(time.Second) {
		return "-"
	}
	return duration(time.Duration(math.Round(v * float64(time.Second))))
}

// age is seconds for an optional value: "-" when absent.
func age(s *float64) string {
	if s == nil {
		return "-"
	}
	return seconds(*s)
}

// timestamp is how the -o wide columns print a time: RFC 3339 in UTC with
// milliseconds, always three digits so that a column aligns ("-" for the
// zero time).
func timestamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// clock is the time of day (UTC) the narrow tables print for a recent
// event; -o wide prints the full timestamp.
func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("15:04:05.000")
}
