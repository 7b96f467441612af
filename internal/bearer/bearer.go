// Package bearer reads "Authorization: Bearer <token>" headers (RFC 6750)
// for the server and the web workbench, once: the scheme is matched
// case-insensitively, as RFC 9110 §11.1 says of every auth scheme
// ("bearer", "BEARER"), and the token is compared in constant time.
package bearer

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// Token returns the token of r's Authorization header, trimmed of
// surrounding spaces, and whether the header has the Bearer scheme.
func Token(r *http.Request) (string, bool) {
	scheme, tok, found := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// Match reports whether r carries want as its bearer token, in constant
// time; an empty want never matches.
func Match(r *http.Request, want string) bool {
	got, ok := Token(r)
	return ok && want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}
