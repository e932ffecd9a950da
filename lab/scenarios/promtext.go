package scenarios

import (
	"fmt"
	"strconv"
	"strings"
)

// Sample is one line of the Prometheus text exposition format.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Samples is a parsed /metrics page.
type Samples []Sample

// Sum adds the values of name's series whose labels include every pair of
// match; found is false when no series matched.
func (s Samples) Sum(name string, match map[string]string) (sum float64, found bool) {
	for _, x := range s {
		if x.Name != name || !hasLabels(x.Labels, match) {
			continue
		}
		sum += x.Value
		found = true
	}
	return sum, found
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// ParseMetrics parses the Prometheus text format (comments skipped). An
// error names the line.
func ParseMetrics(text string) (Samples, error) {
	var out Samples
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseSampleLine(line)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d: %w: %q", n+1, err, line)
		}
		out = append(out, s)
	}
	return out, nil
}

func parseSampleLine(line string) (Sample, error) {
	s := Sample{Labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return s, fmt.Errorf("no value")
	}
	s.Name = line[:i]
	rest := line[i:]
	if rest[0] == '{' {
		var err error
		rest, err = parseLabels(rest[1:], s.Labels)
		if err != nil {
			return s, err
		}
	}
	f := strings.Fields(rest)
	if len(f) < 1 || len(f) > 2 {
		return s, fmt.Errorf("want a value and an optional timestamp")
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return s, fmt.Errorf("value: %w", err)
	}
	s.Value = v
	return s, nil
}

// parseLabels reads `name="value",...}` into m and returns what follows.
func parseLabels(in string, m map[string]string) (string, error) {
	for {
		in = strings.TrimLeft(in, " ,")
		if strings.HasPrefix(in, "}") {
			return in[1:], nil
		}
		eq := strings.IndexByte(in, '=')
		if eq <= 0 || len(in) < eq+2 || in[eq+1] != '"' {
			return "", fmt.Errorf("bad label at %q", in)
		}
		name := strings.TrimSpace(in[:eq])
		val, rest, err := unquoteLabel(in[eq+2:])
		if err != nil {
			return "", err
		}
		m[name] = val
		in = rest
	}
}

// unquoteLabel reads an escaped label value up to its closing quote.
func unquoteLabel(in string) (val, rest string, err error) {
	var b strings.Builder
	for i := 0; i < len(in); i++ {
		switch c := in[i]; c {
		case '"':
			return b.String(), in[i+1:], nil
		case '\\':
			if i+1 >= len(in) {
				return "", "", fmt.Errorf("dangling escape")
			}
			i++
			switch in[i] {
			case 'n':
				b.WriteByte('\n')
			default:
				b.WriteByte(in[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", fmt.Errorf("unterminated label value")
}
