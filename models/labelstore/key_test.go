package labelstore

import (
	"testing"
)

func TestKey(t *testing.T) {
	// sha256("q") = 8e35c2cd3bf6641b..., sha256("snip") = b0e6a23a525bb18a... (sha256sum)
	for _, tc := range []struct{ q, chunk, snip, want string }{
		{"q", "doc#3", "ignored", "8e35c2cd3bf6641b:doc#3"},
		{"q", "", "snip", "8e35c2cd3bf6641b:sha:b0e6a23a525bb18a"},
	} {
		if got := Key(tc.q, tc.chunk, tc.snip); got != tc.want {
			t.Errorf("Key(%q, %q, %q) = %q, want %q", tc.q, tc.chunk, tc.snip, got, tc.want)
		}
	}
	if Key("q", "", "a") == Key("q", "", "b") {
		t.Error("different snippets share a key")
	}
}
