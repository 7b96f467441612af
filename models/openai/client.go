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
	"net"
	"net/http"
	"strconv"
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
	// RetryAfter is the wait the server asked for in its Retry-After header
	// (delay-seconds or an HTTP date; 0 when absent or unparsable). A retry
	// waits at least this long (at most MaxRetryAfter).
	RetryAfter time.Duration
}

// IsContextLength reports whether err is a server's refusal of a prompt
// longer than the model's context: HTTP 400 with vLLM's (and ragforge
// serve's) "This model's maximum context length is N tokens…" or OpenAI's
// code "context_length_exceeded". Retrying cannot help.
func IsContextLength(err error) bool {
	var se *StatusError
	if !errors.As(err, &se) || se.Code != http.StatusBadRequest {
		return false
	}
	return strings.Contains(se.Body, "maximum context length") || strings.Contains(se.Body, "context_length_exceeded")
}

// MaxRetryAfter bounds the wait a Retry-After header can impose on one retry.
const MaxRetryAfter = 2 * time.Minute

// retryAfter parses a Retry-After header value (RFC 9110 §10.2.3).
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0
		}
		return min(time.Duration(n)*time.Second, MaxRetryAfter)
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), MaxRetryAfter)
	}
	return 0
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("HTTP %d: %s", e.Code, strings.TrimSpace(e.Body))
}

// MalformedError is a 2xx answer whose body is not the expected JSON (a proxy
// error page, a truncated body). It is retried like a 5xx.
type MalformedError struct{ Err error }

func (e *MalformedError) Error() string { return "answer is not the expected JSON: " + e.Err.Error() }
func (e *MalformedError) Unwrap() error { return e.Err }

// ErrEmptyAnswer and ErrInvalidUTF8 are chat answers that carry no usable text.
var (
	ErrEmptyAnswer = errors.New("chat answer is empty")
	ErrInvalidUTF8 = errors.New("chat answer is not valid UTF-8")
)

// Cause names the kind of a request failure, for error summaries:
//
//	"timeout"         an attempt ran past Options.Timeout
//	"unreachable"     connection refused, DNS failure, other dial errors
//	"http_<code>"     a non-2xx answer, e.g. "http_503"
//	"malformed_json"  a 2xx answer that is not the expected JSON
//	"empty_answer"    a chat answer with no text
//	"invalid_utf8"    a chat answer with broken bytes
//	"canceled"        the caller's context was cancelled
//	"request"         anything else
func Cause(err error) string {
	var se *StatusError
	var me *MalformedError
	var oe *net.OpError
	var de *net.DNSError
	var ne net.Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &se):
		return fmt.Sprintf("http_%d", se.Code)
	case errors.As(err, &me):
		return "malformed_json"
	case errors.Is(err, ErrEmptyAnswer):
		return "empty_answer"
	case errors.Is(err, ErrInvalidUTF8):
		return "invalid_utf8"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &de), errors.As(err, &oe):
		return "unreachable"
	}
	return "request"
}

// PreflightTimeout bounds Preflight: a server that does not answer this fast
// is reported before any work starts.
const PreflightTimeout = 3 * time.Second

// Preflight checks that the server answers at all, with one GET /v1/models
// bounded by PreflightTimeout and no retries, so a wrong URL fails in
// seconds rather than after every item's retries. Any HTTP answer (even 404
// from servers without /models) counts as reachable. Errors name the URL:
// connection refused, DNS failure, timeout.
func (c *Client) Preflight(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, PreflightTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/models", nil)
	if err != nil {
		return fmt.Errorf("server %s: %w", c.base, err)
	}
	if c.opt.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.opt.APIKey)
	}
	resp, err := c.opt.HTTPClient.Do(req)
	if err != nil {
		if Cause(err) == "timeout" {
			return fmt.Errorf("server %s did not answer within %s: %w", c.base, PreflightTimeout, err)
		}
		return fmt.Errorf("server %s is not reachable: %w", c.base, err)
	}
	resp.Body.Close()
	return nil
}

func retryable(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code == http.StatusTooManyRequests || se.Code >= 500
	}
	var me *MalformedError
	if errors.As(err, &me) {
		return true
	}
	// Transport errors and per-attempt timeouts; not the caller's cancellation.
	return !errors.Is(err, context.Canceled)
}

// Post sends body as JSON to the server's path below the base URL (e.g.
// "/pipeline" for ragforge serve's /v1/pipeline) and decodes the answer into
// out, with the client's timeout, retries, backoff and concurrency limit:
// for a server's own endpoints beside the OpenAI ones.
func (c *Client) Post(ctx context.Context, path string, body, out any) error {
	return c.post(ctx, path, body, out)
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
		wait := delay + time.Duration((rand.Float64()*0.4-0.2)*float64(delay))
		if se := (*StatusError)(nil); errors.As(err, &se) && se.RetryAfter > wait {
			wait = se.RetryAfter // the server said when it can take more
		}
		select {
		case <-time.After(wait):
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
		return &StatusError{Code: resp.StatusCode, Body: string(data), RetryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &MalformedError{Err: err}
	}
	return nil
}
