package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ragforge/ragforge/models/lm"
	"io"
	"net/http"
)

func isRequestError(err error) bool {
	var re *requestError
	return errors.As(err, &re)
}

// ErrorBody is the JSON of every error response, the OpenAI error shape:
// message, type (invalid_request_error, authentication_error,
// server_error, timeout), param (the field at fault or null) and code (a
// machine-readable string such as model_not_found, or null).
type ErrorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// statusCodes are the OpenAI-style codes of error statuses.
var statusCodes = map[int]string{
	401: "invalid_api_key", 403: "forbidden", 404: "not_found", 409: "conflict",
	413: "limit_exceeded", 415: "unsupported_media_type", 421: "misdirected_request",
	503: "unavailable",
}

func writeError(w http.ResponseWriter, err error) {
	code := 500
	typ := "server_error"
	var param, ecode string
	var re *requestError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &re):
		code, typ, param, ecode = re.code, "invalid_request_error", re.param, re.errCode
		switch {
		case code == 401:
			typ = "authentication_error"
		case code == 503:
			typ = "timeout"
		}
	case errors.As(err, &mbe):
		code, typ = 413, "invalid_request_error"
	case errors.Is(err, lm.ErrBadPrompt):
		code, typ = 400, "invalid_request_error"
	case errors.Is(err, context.DeadlineExceeded):
		code, typ, ecode = 503, "timeout", "timeout"
	}
	if ecode == "" {
		ecode = statusCodes[code]
	}
	var b ErrorBody
	b.Error.Message, b.Error.Type = err.Error(), typ
	if param != "" {
		b.Error.Param = &param
	}
	if ecode != "" {
		b.Error.Code = &ecode
	}
	writeJSON(w, code, b)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// decode reads one JSON value into v: strict (unknown fields are errors)
// for ragforge's own endpoints, lenient for the OpenAI-compatible ones
// (clients send fields such as "stream" or "user" we ignore). Errors are
// 400, or 413 for a body over the limit.
func decode(r *http.Request, v any, strict bool) error {
	dec := json.NewDecoder(r.Body)
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &requestError{code: 413, msg: fmt.Sprintf("request body over %d bytes", mbe.Limit)}
		}
		return badRequest("bad JSON body: %v", err)
	}
	if dec.More() {
		return badRequest("bad JSON body: more than one value")
	}
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &requestError{code: 413, msg: fmt.Sprintf("request body over %d bytes", mbe.Limit)}
		}
	}
	return nil
}

func notAvailable(what string) error {
	return &requestError{code: 404, msg: what + " is not available: the pipeline has none"}
}
