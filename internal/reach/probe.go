package reach

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// probeTimeout bounds the /healthz request that proves the forward reaches
// the agent.
const probeTimeout = 10 * time.Second

// probe GETs base/healthz through the forward: a pod that is Running but
// whose agent does not listen (crashed, another --listen port) fails here,
// with the forward's own error, rather than in the command that follows.
func probe(ctx context.Context, base string, forwardErr *lastError) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
		err = fmt.Errorf("/healthz answered %s", resp.Status)
	}
	// The forward logs the stream's failure as it closes the stream, which
	// may be just after the request sees the connection end.
	for range 10 {
		if msg := forwardErr.get(); msg != "" {
			return fmt.Errorf("%s", msg)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// lastError is a logr sink that keeps the last error the port-forward
// logs (client-go logs a stream's failure, such as the agent's port
// refusing the connection, instead of returning it).
type lastError struct {
	mu  sync.Mutex
	msg string
}

func (l *lastError) get() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.msg
}

func (l *lastError) logger() logr.Logger { return logr.New(errorSink{l}) }

type errorSink struct{ l *lastError }

func (errorSink) Init(logr.RuntimeInfo)            {}
func (errorSink) Enabled(int) bool                 { return false }
func (errorSink) Info(int, string, ...any)         {}
func (s errorSink) WithValues(...any) logr.LogSink { return s }
func (s errorSink) WithName(string) logr.LogSink   { return s }
func (s errorSink) Error(err error, msg string, _ ...any) {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	if err != nil {
		s.l.msg = err.Error()
	} else {
		s.l.msg = msg
	}
}
