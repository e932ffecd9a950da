package informer

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// freePort returns a loopback address nothing listens on (yet).
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

func serveOK(t *testing.T, addr string, hits *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.WriteString(w, "ok")
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

func newTestTransport(interval time.Duration) *ReconnectTransport {
	return NewReconnectTransport(&http.Transport{DisableKeepAlives: true}, interval)
}

func TestReconnectHoldsGETUntilTheServerListens(t *testing.T) {
	addr := freePort(t)
	rt := newTestTransport(100 * time.Millisecond)
	client := &http.Client{Transport: rt}
	type result struct {
		body string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := client.Get("http://" + addr + "/api/v1/pods?watch=true")
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		done <- result{string(b), err}
	}()
	time.Sleep(400 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("request returned while nothing listened: %+v", r)
	default:
	}
	since, err, down := rt.Unreachable()
	if !down || since.IsZero() || err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("Unreachable() = %v, %v, %v; want down with a connection-refused error", since, err, down)
	}
	var hits atomic.Int32
	serveOK(t, addr, &hits)
	back := time.Now()
	select {
	case r := <-done:
		if r.err != nil || r.body != "ok" {
			t.Fatalf("got %q, %v; want ok", r.body, r.err)
		}
		// interval 100 ms ±50 %: the held request redials within 150 ms.
		if d := time.Since(back); d > time.Second {
			t.Errorf("held request answered %s after the server came back", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("held request not answered 5 s after the server came back")
	}
	if _, _, down := rt.Unreachable(); down {
		t.Error("still reported unreachable after a successful request")
	}
	if hits.Load() != 1 {
		t.Errorf("server saw %d requests, want 1", hits.Load())
	}
}

func TestReconnectDoesNotHoldWritesOrCancelledRequests(t *testing.T) {
	addr := freePort(t)
	rt := newTestTransport(time.Hour)
	client := &http.Client{Transport: rt}
	start := time.Now()
	_, err := client.Post("http://"+addr+"/apis/authentication.k8s.io/v1/tokenreviews", "application/json",
		strings.NewReader("{}"))
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("POST to a closed port: err %v after %s; want an immediate error", err, time.Since(start))
	}
	if _, _, down := rt.Unreachable(); !down {
		t.Error("a refused POST should still mark the API server unreachable")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/api/v1/nodes", nil)
	start = time.Now()
	_, err = client.Do(req)
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("cancelled GET: err %v after %s; want an error when its context ends", err, time.Since(start))
	}
	if !strings.Contains(err.Error(), "refused") {
		t.Errorf("cancelled GET error %q should name the dial failure", err)
	}
}

func TestReconnectPassesOtherErrorsThrough(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close() // connected, then nothing: not a dial failure
		}
	}()
	rt := newTestTransport(10 * time.Millisecond)
	_, err = (&http.Client{Transport: rt}).Get("http://" + ln.Addr().String() + "/")
	if err == nil {
		t.Fatal("want an error from a server that closes the connection")
	}
	if dialFailed(err) {
		t.Errorf("dialFailed(%v) = true for an established connection", err)
	}
	if n := accepted.Load(); n > 2 { // net/http itself may retry once on a reused-conn race
		t.Errorf("server accepted %d connections; the transport must not retry after a dial succeeded", n)
	}
}
