package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/netdrift/netdrift/internal/api"
)

// queryFlags are shared by the responder commands.
type queryFlags struct {
	agent string
	out   string
}

func parseQuery(name string, args []string, stderr io.Writer, positional int) (*queryFlags, []string, bool) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	q := &queryFlags{}
	fs.StringVar(&q.agent, "agent", "http://127.0.0.1:9760", "the agent's API address")
	fs.StringVar(&q.out, "o", "table", "output: table or json")
	// Allow flags after the positional argument (explain NS/NAME -o json).
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return nil, nil, false
		}
		args = fs.Args()
		if len(args) > 0 {
			pos = append(pos, args[0])
			args = args[1:]
		}
	}
	if err := checkOutput(q.out); err != nil {
		fmt.Fprintf(stderr, "netdrift %s: %v\n", name, err)
		return nil, nil, false
	}
	if len(pos) != positional {
		fmt.Fprintf(stderr, "netdrift %s: expected %d argument(s), got %d\n", name, positional, len(pos))
		return nil, nil, false
	}
	return q, pos, true
}

func (q *queryFlags) get(path string, v any, stderr io.Writer, name string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := api.NewClient(q.agent).Get(ctx, path, v); err != nil {
		fmt.Fprintf(stderr, "netdrift %s: %v\n", name, err)
		return false
	}
	return true
}

// fetch parses a query command without arguments and GETs path into v.
func fetch(name, path string, args []string, stderr io.Writer, v any) (*queryFlags, bool) {
	q, _, ok := parseQuery(name, args, stderr, 0)
	if !ok || !q.get(path, v, stderr, name) {
		return nil, false
	}
	return q, true
}

func dash(s string) string {
	if s == "" || s == ":" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func upDown(b bool) string {
	if b {
		return "up"
	}
	return "DOWN"
}
