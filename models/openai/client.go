// Package openai is a client for OpenAI-compatible HTTP servers (vLLM,
// llama.cpp server, Ollama, ragforge serve): /v1/completions,
// /v1/chat/completions and /v1/embeddings, with per-request timeouts, retries
// with exponential backoff on 429/5xx/transport errors, and a limit on
// concurrent requests.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

// Options configures a Client. Zero fields take the defaults of DefaultOptions.
type Options struct {
	APIKey      string        // sent as "Authorization: Bearer KEY" when set
	Model       string        // default model name for requests that leave it empty
	Timeout     time.Duration // per attempt; default 120s
	MaxRetries  int           // retries after the first attempt; default 3 (negative: none)
	Backoff     time.Duration // first retry delay, doubled each retry with ±20% jitter; default 500ms
	Concurrency int           // requests in flight at once; default 4
	HTTPClient  *http.Client
}

// DefaultOptions returns the defaults used for zero Options fields.
func DefaultOptions() Options {
	return Options{Timeout: 120 * time.Second, MaxRetries: 3, Backoff: 500 * time.Millisecond, Concurrency: 4}
}

// Client talks to one server. It is safe for concurrent use.
type Client struct {
	base string
	opt  Options
	sem  chan struct{}
}

// New returns a client for baseURL, e.g. "http://127.0.0.1:8000/v1" (a
// missing "/v1" suffix is added).
func New(baseURL string, opt Options) *Client {
	d := DefaultOptions()
	if opt.Timeout <= 0 {
		opt.Timeout = d.Timeout
	}
	if opt.MaxRetries == 0 {
		opt.MaxRetries = d.MaxRetries
	} else if opt.MaxRetries < 0 {
		opt.MaxRetries = 0
	}
	if opt.Backoff <= 0 {
		opt.Backoff = d.Backoff
	}
	if opt.Concurrency <= 0 {
		opt.Concurrency = d.Concurrency
	}
	if opt.HTTPClient == nil {
		opt.HTTPClient = &http.Client{}
	}
	base := strings.TrimRight(baseURL, "/")
	if !strings.HasSuffix(base, "/v1") {
		base += "/v1"
	}
	return &Client{base: base, opt: opt, sem: make(chan struct{}, opt.Concurrency)}
}

// BaseURL returns the server's base URL, ending in /v1.
func (c *Client) BaseURL() string { return c.base }

// Model returns the default model name.
func (c *Client) Model() string { return c.opt.Model }

// StatusError is a non-2xx answer from the server.
type StatusError struct {
	Code int
	Body string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("HTTP %d: %s", e.Code, strings.TrimSpace(e.Body))
}

func retryable(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code == http.StatusTooManyRequests || se.Code >= 500
	}
	// Transport errors and per-attempt timeouts; not the caller's cancellation.
	return !errors.Is(err, context.Canceled)
}

// post sends body as JSON to path and decodes the answer into out, retrying
// retryable failures with exponential backoff.
func (c *Client) post(ctx context.Context, path string, body, out any) error {
	payload, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("%s: encode request: %w", path, err)
	}
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-c.sem }()
	delay := c.opt.Backoff
	for attempt := 0; ; attempt++ {
		err = c.once(ctx, path, payload, out)
		if err == nil || attempt >= c.opt.MaxRetries || !retryable(err) || ctx.Err() != nil {
			if err != nil {
				return fmt.Errorf("POST %s%s (attempt %d of %d): %w", c.base, path, attempt+1, c.opt.MaxRetries+1, err)
			}
			return nil
		}
		jitter := time.Duration((rand.Float64()*0.4 - 0.2) * float64(delay))
		select {
		case <-time.After(delay + jitter):
		case <-ctx.Done():
			return fmt.Errorf("POST %s%s: %w (last error: %v)", c.base, path, ctx.Err(), err)
		}
		delay *= 2
	}
}

func (c *Client) once(ctx context.Context, path string, payload []byte, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.opt.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(payload))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.opt.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.opt.APIKey)
	}
	resp, err := c.opt.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		if len(data) > 512 {
			data = data[:512]
		}
		return &StatusError{Code: resp.StatusCode, Body: string(data)}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &StatusError{Code: 502, Body: fmt.Sprintf("answer is not the expected JSON: %v", err)}
	}
	return nil
}
