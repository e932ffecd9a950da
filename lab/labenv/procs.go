package labenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Proc is a process the lab started, identified by PID and kernel start
// time so a recycled PID is never signalled.
type Proc struct {
	Name  string   `json:"name"`
	NS    string   `json:"netns"`
	PID   int      `json:"pid"`
	Start uint64   `json:"start"` // field 22 of /proc/<pid>/stat
	Args  []string `json:"args"`
	Log   string   `json:"log"`
	cmd   *exec.Cmd
	done  chan struct{}
}

// State is what a lab records on disk so "down" works from a new process.
type State struct {
	Name      string  `json:"name"`
	Dir       string  `json:"dir"`
	Nodes     int     `json:"nodes"`
	ProxyMode string  `json:"proxyMode"`
	Runner    *Proc   `json:"runner,omitempty"` // the "lab serve" process, if any
	Procs     []*Proc `json:"procs"`
	HostAPI   string  `json:"hostAPI,omitempty"`
	// HostPrometheus is the host-loopback forward to the lab Prometheus.
	HostPrometheus string `json:"hostPrometheus,omitempty"`
}

func statePath(dir string) string { return filepath.Join(dir, "state.json") }

// ReadState loads a lab's state file.
func ReadState(dir string) (*State, error) {
	b, err := os.ReadFile(statePath(dir))
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", statePath(dir), err)
	}
	return &s, nil
}

func writeState(s *State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := statePath(s.Dir) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, statePath(s.Dir))
}

// procStart returns the start time of pid from /proc, or 0 if it is gone
// or a zombie.
func procStart(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}

// Alive reports whether the recorded process still runs (same PID and
// start time, not a zombie).
func (p *Proc) Alive() bool {
	if p == nil || p.PID <= 0 {
		return false
	}
	if p.done != nil {
		select {
		case <-p.done:
			return false
		default:
		}
	}
	return procStart(p.PID) == p.Start && p.Start != 0
}

// startProc starts binary args inside namespace ns ("" = the caller's),
// logging stdout and stderr to logPath. It runs in its own process group.
func startProc(name, ns, logPath string, args ...string) (*Proc, error) {
	return startProcEnv(name, ns, logPath, nil, args...)
}

// startProcEnv is startProc with extra environment variables (appended to
// this process's environment; a later entry wins).
func startProcEnv(name, ns, logPath string, env []string, args ...string) (*Proc, error) {
	full := args
	bin := args[0]
	if ns != "" {
		bin = "ip"
		full = append([]string{"ip", "netns", "exec", ns}, args...)
	}
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	cmd := exec.Command(bin, full[1:]...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, NS: ns, PID: cmd.Process.Pid, Args: args, Log: logPath, cmd: cmd, done: make(chan struct{})}
	p.Start = procStart(p.PID)
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// signal sends sig to the process if it is still the one we started.
func (p *Proc) signal(sig syscall.Signal) error {
	if !p.Alive() {
		return errors.New(p.Name + " is not running")
	}
	return syscall.Kill(p.PID, sig)
}

// stop sends SIGTERM (after SIGCONT, in case it was frozen), waits up to
// grace, then SIGKILLs. It returns once the process is gone.
func (p *Proc) stop(grace time.Duration) {
	if !p.Alive() {
		return
	}
	_ = syscall.Kill(p.PID, syscall.SIGCONT)
	_ = syscall.Kill(p.PID, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for p.Alive() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if p.Alive() {
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
	}
	for i := 0; i < 250 && p.Alive(); i++ {
		time.Sleep(20 * time.Millisecond)
	}
}
