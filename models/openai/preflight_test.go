package openai

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// deadURL returns a loopback URL nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/v1"
}

func TestPreflight(t *testing.T) {
	notFound := httptest.NewServer(http.NotFoundHandler()) // servers without /models are still up
	defer notFound.Close()
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/models" {
			t.Errorf("preflight sent %s %s, want GET /v1/models", r.Method, r.URL.Path)
		}
		fmt.Fprint(w, `{"object":"list","data":[]}`)
	}))
	defer ok.Close()
	dead := deadURL(t)
	for _, tc := range []struct {
		name, url string
		want      []string // substrings of the error; nil: no error
	}{
		{"models endpoint", ok.URL + "/v1", nil},
		{"no models endpoint", notFound.URL, nil},
		{"connection refused", dead, []string{dead, "not reachable", "connection refused"}},
		{"DNS failure", "http://no-such-host.invalid:8000/v1", []string{"http://no-such-host.invalid:8000/v1", "not reachable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := New(tc.url, Options{}).Preflight(context.Background())
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Preflight: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Preflight succeeded against a dead server")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if c := Cause(err); c != "unreachable" {
				t.Errorf("Cause = %q, want unreachable", c)
			}
		})
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestCause(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("POST x: %w", &StatusError{Code: 503, Body: "busy"}), "http_503"},
		{fmt.Errorf("POST x: %w", &MalformedError{Err: errors.New("unexpected EOF")}), "malformed_json"},
		{fmt.Errorf("POST x: %w", context.DeadlineExceeded), "timeout"},
		{&net.OpError{Op: "read", Err: timeoutErr{}}, "timeout"},
		{fmt.Errorf("POST x: %w", context.Canceled), "canceled"},
		{&net.OpError{Op: "dial", Err: errors.New("connect: connection refused")}, "unreachable"},
		{&net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}, "unreachable"},
		{fmt.Errorf("%w (finish_reason %q)", ErrEmptyAnswer, "length"), "empty_answer"},
		{ErrInvalidUTF8, "invalid_utf8"},
		{errors.New("something else"), "request"},
	} {
		if got := Cause(tc.err); got != tc.want {
			t.Errorf("Cause(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// A 2xx answer that is not JSON is reported as malformed, not as HTTP 502.
func TestMalformedAnswerCause(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<html>proxy error</html>")
	}))
	defer srv.Close()
	_, err := New(srv.URL, Options{MaxRetries: -1}).ChatText(context.Background(), "", "hi", 8, 0)
	if Cause(err) != "malformed_json" {
		t.Errorf("error %v: cause %q, want malformed_json", err, Cause(err))
	}
}
