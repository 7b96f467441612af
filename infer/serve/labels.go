package serve

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/ragforge/ragforge/infer/labelapi"
	"github.com/ragforge/ragforge/models/labelstore"
)

// The label API (GET /v1/labels, GET /v1/labels/{id}, POST
// /v1/labels/{id}/review and /undo) is infer/labelapi's, as the web
// workbench's /api/labels is; here its refusals become requestErrors.

func (s *Server) labels() (*labelstore.Store, error) {
	if s.opt.Labels == nil {
		return nil, &requestError{code: 503, msg: "no label store: start the server with a labels database"}
	}
	return s.opt.Labels, nil
}

// labelErr turns a labelapi.Error into a requestError with its status and
// parameter; other errors are server errors.
func labelErr(err error) error {
	var le *labelapi.Error
	if errors.As(err, &le) {
		return &requestError{code: le.Status, param: le.Param, msg: le.Error()}
	}
	return err
}

// labelRequest returns the store and the {id} of a request on one label.
func (s *Server) labelRequest(r *http.Request) (*labelstore.Store, int64, error) {
	st, err := s.labels()
	if err != nil {
		return nil, 0, err
	}
	id, err := labelapi.ParseID(r.PathValue("id"))
	return st, id, labelErr(err)
}

func (s *Server) listLabels(w http.ResponseWriter, r *http.Request) error {
	st, err := s.labels()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f, err := labelapi.ParseFilter(q)
	if err != nil {
		return labelErr(err)
	}
	f.Limit = 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			return badRequest("query parameter %q: %q outside [1, 10000]", "limit", v)
		}
		f.Limit = n
	}
	recs, err := st.List(f)
	if err != nil {
		return err
	}
	if recs == nil {
		recs = []labelstore.Record{}
	}
	writeJSON(w, 200, map[string]any{"labels": recs})
	return nil
}

func (s *Server) getLabel(w http.ResponseWriter, r *http.Request) error {
	st, id, err := s.labelRequest(r)
	if err != nil {
		return err
	}
	rec, err := st.Get(id)
	if err != nil {
		return labelErr(labelapi.StoreErr(err))
	}
	writeJSON(w, 200, rec)
	return nil
}

// ReviewRequest is the body of POST /v1/labels/{id}/review: action
// [HELPFUL], [NOT_HELPFUL], confirm or flip, and a reviewer (required).
type ReviewRequest = labelapi.ReviewRequest

func (s *Server) reviewLabel(w http.ResponseWriter, r *http.Request) error {
	st, id, err := s.labelRequest(r)
	if err != nil {
		return err
	}
	var req ReviewRequest
	if err := decode(r, &req, true); err != nil {
		return err
	}
	rec, err := labelapi.Review(st, id, req, "")
	if err != nil {
		return labelErr(err)
	}
	writeJSON(w, 200, rec)
	return nil
}

func (s *Server) undoLabel(w http.ResponseWriter, r *http.Request) error {
	st, id, err := s.labelRequest(r)
	if err != nil {
		return err
	}
	rec, err := labelapi.Undo(st, id)
	if err != nil {
		return labelErr(err)
	}
	writeJSON(w, 200, rec)
	return nil
}
