package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Client queries a running agent.
type Client struct {
	Base string // e.g. http://127.0.0.1:9760
	HTTP *http.Client
	// Token, when set, is sent as a bearer token (the secure endpoint
	// checks it with a TokenReview).
	Token string
}

// NewClient returns a client with a short timeout: responders need answers fast.
func NewClient(base string) *Client {
	return &Client{Base: strings.TrimRight(base, "/"), HTTP: &http.Client{Timeout: 10 * time.Second}}
}

// Get decodes GET path into v; an error names the agent and the status.
func (c *Client) Get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+path, nil)
	if err != nil {
		return err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("agent at %s: %w", c.Base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("agent at %s: reading %s: %w", c.Base, path, err)
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
		return fmt.Errorf("agent at %s: %s: %s: %s", c.Base, path, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("agent at %s: decoding %s: %w", c.Base, path, err)
	}
	if err := checkKind(body, v); err != nil {
		return fmt.Errorf("agent at %s: %s: %w", c.Base, path, err)
	}
	return nil
}

// checkKind refuses a document of another kind than v's (an agent that
// writes no kind is taken at its word).
func checkKind(body []byte, v any) error {
	var head struct {
		Kind string `json:"kind"`
	}
	_ = json.Unmarshal(body, &head)
	if want := KindOf(v); head.Kind != "" && want != "" && head.Kind != want {
		return fmt.Errorf("the agent answered a %s, not a %s", head.Kind, want)
	}
	return nil
}
