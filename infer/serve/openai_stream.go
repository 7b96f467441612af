package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// sse writes server-sent events: "data: <json>\n\n" per event, flushed,
// and "data: [DONE]\n\n" at the end (the OpenAI stream terminator).
type sse struct {
	w       http.ResponseWriter
	started bool
}

func newSSE(w http.ResponseWriter) *sse { return &sse{w: w} }

func (s *sse) send(v any) error {
	if !s.started {
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		s.w.WriteHeader(200)
		s.started = true
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(s.w, "data: %s\n\n", b); err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}

func (s *sse) done() error {
	if !s.started {
		return s.send(struct{}{})
	}
	_, err := fmt.Fprint(s.w, "data: [DONE]\n\n")
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
	return err
}
