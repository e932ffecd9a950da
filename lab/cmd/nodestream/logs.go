package main

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// logServer serves `kubectl logs` of the agent's container from the lab
// agent's log file, which every run of the agent appends to. RunsFile
// (written by the lab before each start) lists the file's size at each
// start, one decimal byte offset a line: the current container's log is
// the last run, `--previous` the one before it, as a kubelet keeps the log
// of a container's previous instance after a restart.
type logServer struct {
	file string
}

func (s *logServer) runsFile() string { return s.file + ".runs" }

func (s *logServer) serve(w http.ResponseWriter, req *http.Request) {
	pod, container := req.PathValue("pod"), req.PathValue("container")
	q := req.URL.Query()
	for _, p := range []string{"timestamps", "sinceSeconds", "sinceTime"} {
		if v := q.Get(p); v != "" && v != "false" {
			http.Error(w, fmt.Sprintf("%s: not supported by the lab's nodestream (previous, tailLines, limitBytes and follow are)", p), http.StatusBadRequest)
			return
		}
	}
	if container != agentContainer || s.file == "" {
		http.Error(w, fmt.Sprintf("container %q in pod %q: the lab keeps logs only of the netdrift agent's container (%q)", container, pod, agentContainer), http.StatusNotFound)
		return
	}
	previous := q.Get("previous") == "true"
	log.Printf("logs %s/%s -c %s previous=%t", req.PathValue("ns"), pod, container, previous)
	from, to, err := s.run(previous)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if from < 0 {
		http.Error(w, fmt.Sprintf("previous terminated container %q in pod %q not found", container, pod), http.StatusBadRequest)
		return
	}
	b, err := readRange(s.file, from, to)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	end := from + int64(len(b))
	b, err = trim(b, q.Get("tailLines"), q.Get("limitBytes"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write(b)
	if q.Get("follow") == "true" && !previous {
		s.follow(w, req, end)
	}
}

// run returns the byte range [from, to) of the current run (to = -1: the
// end of the file) or of the previous one; from = -1 when there is no
// previous run.
func (s *logServer) run(previous bool) (from, to int64, err error) {
	var starts []int64
	b, err := os.ReadFile(s.runsFile())
	if err != nil && !os.IsNotExist(err) {
		return 0, 0, err
	}
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", s.runsFile(), err)
		}
		starts = append(starts, n)
	}
	switch {
	case !previous && len(starts) == 0:
		return 0, -1, nil
	case !previous:
		return starts[len(starts)-1], -1, nil
	case len(starts) < 2:
		return -1, 0, nil
	}
	return starts[len(starts)-2], starts[len(starts)-1], nil
}

func readRange(file string, from, to int64) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return nil, err
	}
	var r io.Reader = f
	if to >= 0 {
		r = io.LimitReader(f, to-from)
	}
	return io.ReadAll(r)
}

// trim keeps the last tailLines lines, then at most limitBytes bytes (the
// kubelet's order).
func trim(b []byte, tailLines, limitBytes string) ([]byte, error) {
	if tailLines != "" {
		n, err := strconv.Atoi(tailLines)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("tailLines %q: want a number >= 0", tailLines)
		}
		lines := bytes.SplitAfter(b, []byte("\n"))
		if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
			lines = lines[:len(lines)-1]
		}
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		b = bytes.Join(lines, nil)
	}
	if limitBytes != "" {
		n, err := strconv.Atoi(limitBytes)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("limitBytes %q: want a number >= 1", limitBytes)
		}
		b = b[:min(n, len(b))]
	}
	return b, nil
}

// follow writes what the agent appends from offset on, until the client
// goes away.
func (s *logServer) follow(w http.ResponseWriter, req *http.Request, offset int64) {
	fl, _ := w.(http.Flusher)
	for {
		if fl != nil {
			fl.Flush()
		}
		select {
		case <-req.Context().Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		b, err := readRange(s.file, offset, -1)
		if err != nil {
			return
		}
		if len(b) > 0 {
			if _, err := w.Write(b); err != nil {
				return
			}
			offset += int64(len(b))
		}
	}
}
