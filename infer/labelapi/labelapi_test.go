package labelapi

import (
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/labelstore"
)

// status returns the HTTP status of err: its Error's, 0 for nil, -1 for
// an error without one.
func status(err error) int {
	var e *Error
	switch {
	case err == nil:
		return 0
	case errors.As(err, &e):
		return e.Status
	}
	return -1
}

func TestParseID(t *testing.T) {
	for _, c := range []struct {
		in     string
		want   int64
		status int
	}{
		{"7", 7, 0}, {"0", 0, 400}, {"-3", 0, 400}, {"abc", 0, 400}, {"", 0, 400},
	} {
		got, err := ParseID(c.in)
		if got != c.want || status(err) != c.status {
			t.Errorf("ParseID(%q) = %d, %v; want %d, status %d", c.in, got, err, c.want, c.status)
		}
		if err != nil && !strings.Contains(err.Error(), `"`+c.in+`"`) {
			t.Errorf("ParseID(%q): error %q does not quote the id", c.in, err)
		}
	}
}

func TestParseFilter(t *testing.T) {
	yes := true
	for _, c := range []struct {
		query string
		want  labelstore.Filter
		param string // the parameter an error names; "" for no error
	}{
		{"", labelstore.Filter{}, ""},
		{"run=r1&class=%5BHELPFUL%5D&method=evidence", labelstore.Filter{RunID: "r1", Class: filter.Helpful, Method: "evidence"}, ""},
		{"disagreement=true&low_confidence=0.5&reviewed=1", labelstore.Filter{Disagreement: true, LowConfidence: 0.5, Reviewed: &yes}, ""},
		{"class=helpful", labelstore.Filter{}, "class"},
		{"disagreement=yes", labelstore.Filter{}, "disagreement"},
		{"reviewed=maybe", labelstore.Filter{}, "reviewed"},
		{"low_confidence=-1", labelstore.Filter{}, "low_confidence"},
		{"low_confidence=NaN", labelstore.Filter{}, "low_confidence"},
	} {
		q, err := url.ParseQuery(c.query)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseFilter(q)
		if c.param != "" {
			var e *Error
			if !errors.As(err, &e) || e.Status != 400 || e.Param != c.param || !strings.Contains(err.Error(), `"`+c.param+`"`) {
				t.Errorf("ParseFilter(%q) error %v, want a 400 naming %q", c.query, err, c.param)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseFilter(%q): %v", c.query, err)
			continue
		}
		if got.RunID != c.want.RunID || got.Class != c.want.Class || got.Method != c.want.Method || got.Disagreement != c.want.Disagreement ||
			got.LowConfidence != c.want.LowConfidence || (got.Reviewed == nil) != (c.want.Reviewed == nil) || (got.Reviewed != nil && *got.Reviewed != *c.want.Reviewed) {
			t.Errorf("ParseFilter(%q) = %+v, want %+v", c.query, got, c.want)
		}
	}
}

func TestReviewAndUndo(t *testing.T) {
	st, err := labelstore.OpenStore(filepath.Join(t.TempDir(), "labels.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l := []labelstore.Label{{RunID: "r", Key: "k", ExampleID: "q#d#0", Question: "q", Snippet: "s", Label: filter.Helpful, Method: labelstore.MethodEvidence}}
	if err := st.Put(l); err != nil {
		t.Fatal(err)
	}
	id := l[0].ID
	if _, err := Undo(st, id); status(err) != 409 {
		t.Fatalf("undo before any review: %v, want 409", err)
	}
	if _, err := Undo(st, id+100); status(err) != 404 {
		t.Fatalf("undo of an unknown label: %v, want 404", err)
	}
	for _, c := range []struct {
		name     string
		req      ReviewRequest
		def      string
		id       int64
		status   int
		reviewer string
	}{
		{"unknown action", ReviewRequest{Action: "maybe", Reviewer: "ana"}, "", id, 400, ""},
		{"no reviewer and no default", ReviewRequest{Action: labelstore.ReviewFlip, Reviewer: "  "}, "", id, 400, ""},
		{"unknown label", ReviewRequest{Action: labelstore.ReviewFlip, Reviewer: "ana"}, "", id + 100, 404, ""},
		{"default reviewer", ReviewRequest{Action: labelstore.ReviewConfirm}, "web", id, 0, "web"},
		{"reviewer trimmed", ReviewRequest{Action: labelstore.ReviewFlip, Reviewer: " ana "}, "web", id, 0, "ana"},
	} {
		rec, err := Review(st, c.id, c.req, c.def)
		if status(err) != c.status {
			t.Fatalf("%s: %v, want status %d", c.name, err, c.status)
		}
		if err == nil && rec.Reviewer != c.reviewer {
			t.Fatalf("%s: reviewer %q, want %q", c.name, rec.Reviewer, c.reviewer)
		}
	}
	rec, err := Undo(st, id)
	if err != nil || rec.Reviews != 1 || rec.Effective != filter.Helpful {
		t.Fatalf("undo of the flip: %+v, %v; want 1 review left, effective %s", rec, err, filter.Helpful)
	}
}
