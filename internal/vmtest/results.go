package vmtest

import (
	"regexp"
	"strconv"
	"strings"
)

// Result is what one VM run produced.
type Result struct {
	// Console is the kernel console (boot messages, module errors).
	Console string
	// Output is the raw results port: markers and every binary's output.
	Output string
	// Binaries holds each test binary's outcome, by name.
	Binaries map[string]*BinaryResult
	// BootSeconds and DoneSeconds are the guest's uptime when init started
	// the tests and when it finished.
	BootSeconds, DoneSeconds float64
	// Done reports that the guest finished every binary.
	Done bool
	// ModuleFailures lists modules that did not load.
	ModuleFailures []string
}

// BinaryResult is one test binary's run in the guest.
type BinaryResult struct {
	Name     string
	Output   string
	ExitCode int // -1 when the binary did not finish
	// Tests maps a test name (subtests as "Parent/sub") to PASS, FAIL or SKIP.
	Tests map[string]string
}

var testLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+) \(`)

// parseOutput splits the results port into per-binary results.
func parseOutput(out string) *Result {
	r := &Result{Output: out, Binaries: map[string]*BinaryResult{}}
	var cur *BinaryResult
	var body strings.Builder
	for _, line := range strings.Split(strings.ReplaceAll(out, "\r", ""), "\n") {
		rest, isMark := strings.CutPrefix(line, markPrefix)
		if !isMark {
			if cur != nil {
				body.WriteString(line + "\n")
				if m := testLine.FindStringSubmatch(line); m != nil {
					cur.Tests[m[2]] = m[1]
				}
			}
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "booted":
			r.BootSeconds = seconds(f)
		case "DONE":
			r.Done, r.DoneSeconds = true, seconds(f)
		case "module-failed":
			if len(f) > 1 {
				r.ModuleFailures = append(r.ModuleFailures, f[1])
			}
		case "BEGIN":
			if len(f) > 1 {
				cur = &BinaryResult{Name: f[1], ExitCode: -1, Tests: map[string]string{}}
				r.Binaries[f[1]] = cur
				body.Reset()
			}
		case "END":
			if cur != nil && len(f) > 2 {
				cur.ExitCode, _ = strconv.Atoi(f[2])
				cur.Output = body.String()
				cur = nil
			}
		}
	}
	if cur != nil { // did not finish: keep what it printed
		cur.Output = body.String()
	}
	return r
}

func seconds(f []string) float64 {
	if len(f) < 2 {
		return 0
	}
	s, _ := strconv.ParseFloat(f[1], 64)
	return s
}
