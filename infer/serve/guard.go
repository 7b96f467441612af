package serve

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"
)

// Browser safety. A page the user visits can send "simple" cross-site
// requests (text/plain or form bodies, no preflight) to a loopback server,
// and a DNS-rebinding page can even read the answers. So, as the Host and
// Origin checks of Jupyter and vLLM's --allowed-origins suggest:
//   - the Host header must name an allowed host (421 Misdirected Request
//     otherwise), which defeats DNS rebinding;
//   - an Origin header, when sent, must name an allowed host (403);
//   - a request body on /v1/* and /api/* must be application/json (415),
//     which a cross-site page cannot send without a CORS preflight that
//     this server never grants.

// loopbackHosts are always allowed.
var loopbackHosts = []string{"localhost", "127.0.0.1", "::1"}

// allowedHosts returns the host names of Host/Origin headers the server
// accepts: loopback names, the bind address's host when it names one, and
// opt.AllowedHosts; nil when they contain "*".
func allowedHosts(opt Options) map[string]bool {
	m := map[string]bool{}
	for _, h := range loopbackHosts {
		m[h] = true
	}
	if host, _, err := net.SplitHostPort(opt.Addr); err == nil && host != "" {
		if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
			m[strings.ToLower(host)] = true
		}
	}
	for _, h := range opt.AllowedHosts {
		if h == "*" {
			return nil
		}
		m[strings.ToLower(strings.Trim(h, "[]"))] = true
	}
	return m
}

// hostOf is the lower-case host of a Host header value ("h:port", "[v6]:port").
func hostOf(hostport string) string {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	return strings.ToLower(strings.Trim(h, "[]"))
}

// checkBrowser enforces the Host and Origin allow-list on every route, the
// JSON body rule on /v1/* and /api/*, and answers paths that are not
// valid UTF-8 (such as /assets/%c0%ae%c0%ae/) 404 before any handler.
func (s *Server) checkBrowser(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.hosts != nil {
			if !s.hosts[hostOf(r.Host)] {
				writeError(w, &requestError{code: http.StatusMisdirectedRequest, msg: "host " + quoteHeader(r.Host) + " is not served here: add it with --allowed-host"})
				return
			}
			if o := r.Header.Get("Origin"); o != "" {
				u, err := url.Parse(o)
				if err != nil || u.Host == "" || !s.hosts[hostOf(u.Host)] {
					writeError(w, &requestError{code: http.StatusForbidden, msg: "origin " + quoteHeader(o) + " is not allowed: add its host with --allowed-host"})
					return
				}
			}
		}
		if !utf8.ValidString(r.URL.Path) || strings.ContainsRune(r.URL.Path, 0) {
			writeError(w, &requestError{code: 404, msg: "no such path"})
			return
		}
		if p := r.URL.Path; (strings.HasPrefix(p, "/v1/") || strings.HasPrefix(p, "/api/")) && hasBody(r) {
			mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if err != nil || mt != "application/json" {
				writeError(w, &requestError{code: http.StatusUnsupportedMediaType, msg: "Content-Type " + quoteHeader(r.Header.Get("Content-Type")) + ": request bodies must be application/json"})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// hasBody reports whether r carries a body or claims a content type (a
// bodyless POST such as an undo may omit both).
func hasBody(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return r.ContentLength > 0
	}
	return r.ContentLength != 0 || r.Header.Get("Content-Type") != ""
}

func quoteHeader(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return "\"" + strings.ToValidUTF8(s, "?") + "\""
}
