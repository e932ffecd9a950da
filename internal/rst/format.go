package rst

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Field is one field of a tracepoint's format file.
type Field struct {
	Decl   string // e.g. "__u8 saddr[28]"
	Name   string // e.g. "saddr"
	Offset int
	Size   int
}

// Format is the parsed content of a tracefs events/<group>/<name>/format file.
type Format struct {
	Name    string
	ID      int
	Fields  map[string]Field
	Reasons map[uint16]string // from the __print_symbolic(REC->reason, ...) table
}

var (
	fieldRe  = regexp.MustCompile(`^field:(.*);\s*offset:(\d+);\s*size:(\d+);`)
	symbolRe = regexp.MustCompile(`\{\s*(\d+),\s*"([^"]*)"\s*\}`)
)

// ParseFormat parses a tracepoint format file. Errors name the line.
func ParseFormat(text string) (Format, error) {
	f := Format{Fields: map[string]Field{}, Reasons: map[uint16]string{}}
	for i, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		switch {
		case strings.HasPrefix(line, "name:"):
			f.Name = strings.TrimSpace(strings.TrimPrefix(line, "name:"))
		case strings.HasPrefix(line, "ID:"):
			id, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "ID:")))
			if err != nil {
				return Format{}, fmt.Errorf("format line %d: bad ID: %w", i+1, err)
			}
			f.ID = id
		case strings.HasPrefix(line, "field:"):
			fl, err := parseField(line)
			if err != nil {
				return Format{}, fmt.Errorf("format line %d: %w", i+1, err)
			}
			f.Fields[fl.Name] = fl
		case strings.HasPrefix(line, "print fmt:"):
			f.Reasons = parseReasonSymbols(line)
		}
	}
	if len(f.Fields) == 0 {
		return Format{}, fmt.Errorf("format: no fields")
	}
	return f, nil
}

func parseField(line string) (Field, error) {
	m := fieldRe.FindStringSubmatch(line)
	if m == nil {
		return Field{}, fmt.Errorf("malformed field %q", line)
	}
	decl := strings.TrimSpace(m[1])
	name := decl
	if i := strings.LastIndexAny(name, " *"); i >= 0 {
		name = name[i+1:]
	}
	if i := strings.IndexByte(name, '['); i >= 0 {
		name = name[:i]
	}
	off, _ := strconv.Atoi(m[2]) // digits by the regexp
	size, _ := strconv.Atoi(m[3])
	if name == "" {
		return Field{}, fmt.Errorf("field without a name: %q", line)
	}
	return Field{Decl: decl, Name: name, Offset: off, Size: size}, nil
}

// parseReasonSymbols extracts the numeric->name table printed for REC->reason.
func parseReasonSymbols(line string) map[uint16]string {
	out := map[uint16]string{}
	i := strings.Index(line, "__print_symbolic(REC->reason")
	if i < 0 {
		return out
	}
	rest := line[i:]
	if j := strings.Index(rest, "})"); j >= 0 {
		rest = rest[:j+1]
	}
	for _, m := range symbolRe.FindAllStringSubmatch(rest, -1) {
		n, err := strconv.ParseUint(m[1], 10, 16)
		if err == nil {
			out[uint16(n)] = m[2]
		}
	}
	return out
}

// wantLayout is the tcp_send_reset layout the bpf program's context struct
// assumes (kernels >= 6.10, which also fire the tracepoint with no socket).
var wantLayout = []Field{
	{Name: "skaddr", Offset: 16, Size: 8},
	{Name: "reason", Offset: 28, Size: 4},
	{Name: "saddr", Offset: 32, Size: 28},
	{Name: "daddr", Offset: 60, Size: 28},
}

// CheckSendResetLayout says whether a tcp_send_reset format matches the
// layout the tracepoint program reads; the error explains the mismatch.
func CheckSendResetLayout(f Format) error {
	for _, w := range wantLayout {
		got, ok := f.Fields[w.Name]
		if !ok {
			return fmt.Errorf("tcp_send_reset has no %q field (kernel older than 6.10: the tracepoint does not fire for resets sent without a socket)", w.Name)
		}
		if got.Offset != w.Offset || got.Size != w.Size {
			return fmt.Errorf("tcp_send_reset field %q at offset %d size %d, want offset %d size %d",
				w.Name, got.Offset, got.Size, w.Offset, w.Size)
		}
	}
	return nil
}
