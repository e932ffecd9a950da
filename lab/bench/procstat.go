package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is USER_HZ: the unit of /proc/<pid>/stat times (100 on every
// Linux architecture Go supports).
const clockTick = 10 * time.Millisecond

// CPU is a process's CPU time from /proc/<pid>/stat: its own (fields 14-15)
// and that of its reaped (waited-for) children (fields 16-17).
type CPU struct {
	User, System           time.Duration
	ChildUser, ChildSystem time.Duration
}

// Self is the process's own CPU time.
func (c CPU) Self() time.Duration { return c.User + c.System }

// Children is the CPU time of children the process has reaped.
func (c CPU) Children() time.Duration { return c.ChildUser + c.ChildSystem }

// Total is Self + Children.
func (c CPU) Total() time.Duration { return c.Self() + c.Children() }

// Sub is the difference c - o (a window).
func (c CPU) Sub(o CPU) CPU {
	return CPU{c.User - o.User, c.System - o.System, c.ChildUser - o.ChildUser, c.ChildSystem - o.ChildSystem}
}

// ParseStat reads fields 14-17 of a /proc/<pid>/stat line. The command name
// (field 2) may hold spaces and parentheses: fields are counted after the
// last ')'.
func ParseStat(line string) (CPU, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return CPU{}, fmt.Errorf("stat: no ')' in %q", line)
	}
	f := strings.Fields(line[i+1:])
	// f[0] is field 3 (state): field n is f[n-3].
	if len(f) < 15 {
		return CPU{}, fmt.Errorf("stat: %d fields after the command, want >= 15", len(f))
	}
	var v [4]time.Duration
	for k := range v {
		n, err := strconv.ParseInt(f[14-3+k], 10, 64)
		if err != nil {
			return CPU{}, fmt.Errorf("stat field %d: %w", 14+k, err)
		}
		v[k] = time.Duration(n) * clockTick
	}
	return CPU{v[0], v[1], v[2], v[3]}, nil
}

// ReadCPU reads pid's CPU times.
func ReadCPU(pid int) (CPU, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return CPU{}, err
	}
	return ParseStat(string(b))
}

// ReadTreeCPU is pid's CPU with its reaped children's, plus that of the
// children still running (recursively): the CPU of a dump that runs across
// a window's end is then split at the window's ends instead of being
// missing from one window (and counted whole in the next). A child that
// exits between the two reads may be missed or counted once twice (one
// 10 ms tick of error per child). It returns how many live children it
// added.
func ReadTreeCPU(pid int) (CPU, int, error) {
	c, err := ReadCPU(pid)
	if err != nil {
		return c, 0, err
	}
	n := 0
	for _, k := range LiveChildren(pid) {
		kc, kn, err := ReadTreeCPU(k)
		if err != nil {
			continue // exited meanwhile (then it is in c's reaped times or soon will be)
		}
		c.ChildUser += kc.User + kc.ChildUser
		c.ChildSystem += kc.System + kc.ChildSystem
		n += 1 + kn
	}
	return c, n, nil
}

// Mem is what /proc/<pid>/status says of memory, in bytes.
type Mem struct {
	HWM, RSS int64 // VmHWM (peak RSS), VmRSS
}

// ParseStatus reads VmHWM and VmRSS (kB) from /proc/<pid>/status text.
func ParseStatus(text string) (Mem, error) {
	var m Mem
	found := 0
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmHWM" && k != "VmRSS") {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return m, fmt.Errorf("status: %s: %q", k, v)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return m, fmt.Errorf("status: %s: %w", k, err)
		}
		if k == "VmHWM" {
			m.HWM = n << 10
		} else {
			m.RSS = n << 10
		}
		found++
	}
	if found != 2 {
		return m, fmt.Errorf("status: VmHWM/VmRSS not found")
	}
	return m, nil
}

// ReadMem reads pid's memory figures.
func ReadMem(pid int) (Mem, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Mem{}, err
	}
	return ParseStatus(string(b))
}

// LiveChildren lists pid's children that still run (or are not yet
// reaped), from /proc/<pid>/task/*/children: their CPU is not yet in the
// parent's cutime/cstime.
func LiveChildren(pid int) []int {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		if err != nil {
			continue
		}
		for _, f := range bytes.Fields(b) {
			if n, err := strconv.Atoi(string(f)); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// Comm is pid's command name ("" when gone).
func Comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}
