package bearer

import (
	"net/http"
	"testing"
)

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		header, want string
		ok           bool
	}{
		{"Bearer s3cret", "s3cret", true},
		{"bearer s3cret", "s3cret", true}, // RFC 9110 §11.1: schemes are case-insensitive
		{"BEARER s3cret", "s3cret", true},
		{"Bearer   s3cret  ", "s3cret", true},
		{"Bearer s3cret", "other", false},
		{"Basic s3cret", "s3cret", false},
		{"Bearers3cret", "s3cret", false},
		{"s3cret", "s3cret", false},
		{"", "s3cret", false},
		{"Bearer ", "", false}, // no token set: nothing matches
	} {
		r, _ := http.NewRequest("GET", "/", nil)
		if c.header != "" {
			r.Header.Set("Authorization", c.header)
		}
		if got := Match(r, c.want); got != c.ok {
			t.Errorf("Authorization %q, token %q: Match %v, want %v", c.header, c.want, got, c.ok)
		}
	}
}
