package serve

import (
	"net/http"
	"strings"
)

// webHandler mounts the web workbench (infer/web.Handler) at /. Pages and
// assets are open: a browser sends no Authorization header when it opens a
// page, and the workbench enforces the same token rule on its own /api
// reads (web.Options.PublicRead). Its /api reads need the token as /v1
// reads do, and every non-GET request is a write.
func (s *Server) webHandler(web http.Handler) http.Handler {
	limited := http.MaxBytesHandler(web, s.opt.MaxBodyBytes)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		access := accessOpen
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			if strings.HasPrefix(r.URL.Path, "/api/") {
				access = accessRead // the same token check as /v1 reads
			}
		default:
			access = accessWrite
		}
		s.guard(access, limited).ServeHTTP(w, r)
	})
}
