package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// agentContainer is the only container whose commands and logs the lab
// serves: the netdrift agent's (the chart's container name).
const agentContainer = "agent"

// execServer runs `kubectl exec` commands of the agent's container. The
// agent pod is host-network, so its commands run in the node's network
// namespace, where nodestream runs; the image's PATH is the directory of
// the lab's netdrift binary. The chart's agent serves its plain API on
// 127.0.0.1:9760, the lab's on <node IP>:9760: at the first exec a
// loopback listener at localListen forwards to the lab's agent, so that a
// command such as `netdrift status` finds the agent where it would in the
// pod.
type execServer struct {
	binDir      string
	localListen string
	dialIP      string
	once        sync.Once
	forwardErr  error
}

func (s *execServer) serve(w http.ResponseWriter, req *http.Request) {
	opts, err := remotecommand.NewOptions(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	container := req.PathValue("container")
	if container != agentContainer || s.binDir == "" {
		http.Error(w, fmt.Sprintf("container %q: the lab runs commands only in the netdrift agent's container (%q) of a lab started with an agent", container, agentContainer), http.StatusNotFound)
		return
	}
	cmd := req.URL.Query()["command"]
	log.Printf("exec %s/%s -c %s -- %q", req.PathValue("ns"), req.PathValue("pod"), container, cmd)
	remotecommand.ServeExec(w, req, s, req.PathValue("pod"), req.PathValue("uid"), container, cmd, opts,
		idleTimeout, streamCreationTimeout, remotecommand.SupportedStreamingProtocols)
}

// ExecInContainer runs cmd with the container's PATH; a non-zero exit is
// returned as the exit error the streaming protocol reports to the client.
func (s *execServer) ExecInContainer(ctx context.Context, _, _, _ string, cmd []string, in io.Reader, out, errw io.WriteCloser, _ bool, _ <-chan remotecommand.TerminalSize, _ time.Duration) error {
	if len(cmd) == 0 {
		return errors.New("no command")
	}
	if err := s.forwardLoopback(); err != nil {
		return err
	}
	path := s.binDir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	bin, err := lookPath(cmd[0], path)
	if err != nil {
		return err
	}
	c := exec.CommandContext(ctx, bin, cmd[1:]...)
	c.Env = []string{"PATH=" + path, "HOME=/root"}
	c.Dir = "/"
	if in != nil {
		c.Stdin = in
	}
	if out != nil {
		c.Stdout = out
	}
	if errw != nil {
		c.Stderr = errw
	}
	err = c.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return utilexec.ExitErrorWrapper{ExitError: exit}
	}
	return err
}

// lookPath finds name in path, as a container runtime does with the
// image's PATH.
func lookPath(name, path string) (string, error) {
	if filepath.IsAbs(name) {
		return name, nil
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q: executable file not found in $PATH", name)
}

// forwardLoopback starts, once, the listener at localListen that connects
// each connection to the same port of the node IP.
func (s *execServer) forwardLoopback() error {
	s.once.Do(func() {
		if s.localListen == "" {
			return
		}
		_, port, err := net.SplitHostPort(s.localListen)
		if err != nil {
			s.forwardErr = err
			return
		}
		ln, err := net.Listen("tcp", s.localListen)
		if err != nil {
			s.forwardErr = fmt.Errorf("agent's local listener %s: %w", s.localListen, err)
			return
		}
		target := net.JoinHostPort(s.dialIP, port)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go splice(c, target)
			}
		}()
	})
	return s.forwardErr
}

func splice(c net.Conn, target string) {
	defer c.Close()
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); closeWrite(up); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); closeWrite(c); done <- struct{}{} }()
	<-done
	<-done
}
