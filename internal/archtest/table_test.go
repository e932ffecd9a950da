package archtest

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// The doc's tables, as the test reads them (docs/architecture.md):
//
//   - under the heading "## Package rules", a table whose
//     first column names a package (module-relative, `internal/x`, or a
//     pattern `internal/x/...`) and whose last column lists the netdrift
//     packages it may import directly, comma-separated, "—" for none;
//   - under "## External modules", a table whose first column names a module
//     path and whose second lists the only packages that may import it.
//
// Names in an import list are under internal/ unless only the module-relative
// path exists (`bpf`, `cmd/agent`); a name may end in "/..." (the package and
// everything below it).
const (
	packagesHeading = "## Package rules"
	externalHeading = "## External modules"
)

// row is one line of a table: its key (first column) and a list column.
type row struct {
	key   string
	names []string
	line  int
}

// readTable returns the rows of the first table after heading; list is the
// index of the column holding the list (-1: the last).
func readTable(r io.Reader, heading string, list int) ([]row, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	var rows []row
	in, header := false, 0
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case !in:
			in = line == heading
		case strings.HasPrefix(line, "|"):
			header++
			if header <= 2 { // the header and the --- line
				continue
			}
			cells := splitRow(line)
			i := list
			if i < 0 {
				i = len(cells) - 1
			}
			if len(cells) < 2 || i >= len(cells) {
				return nil, fmt.Errorf("line %d: a row needs at least two cells: %q", n, line)
			}
			rows = append(rows, row{key: unquote(cells[0]), names: splitNames(cells[i]), line: n})
		case header > 0 || strings.HasPrefix(line, "#"):
			if len(rows) == 0 {
				return nil, fmt.Errorf("no table rows under %q", heading)
			}
			return rows, nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no table under %q", heading)
	}
	return rows, nil
}

func splitRow(line string) []string {
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	cells := strings.Split(line, "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

func unquote(s string) string { return strings.Trim(strings.TrimSpace(s), "`") }

// splitNames reads "`a`, `b/...`" or "—" (none).
func splitNames(cell string) []string {
	if cell == "—" || cell == "-" || cell == "" {
		return nil
	}
	var names []string
	for _, f := range strings.Split(cell, ",") {
		names = append(names, unquote(f))
	}
	return names
}
