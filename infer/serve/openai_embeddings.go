package serve

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"

	"github.com/ragforge/ragforge/models/openai"
)

// embeddingBody is POST /v1/embeddings as the official clients send it
// (openai Node asks for base64 by default), plus ragforge's input_type
// ("document", the default, or "query", which adds the retriever's query
// instruction).
type embeddingBody struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           string          `json:"user"`
	InputType      string          `json:"input_type"`
}

// embeddingOut is one embedding: a float list, or base64 of the
// little-endian float32 bytes (encoding_format base64, as OpenAI).
type embeddingOut struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) error {
	if s.eng.enc == nil {
		return notAvailable("the retriever (embeddings)")
	}
	var req embeddingBody
	if err := decodeOpenAI(r, &req); err != nil {
		return err
	}
	name := s.eng.enc.Name()
	if err := s.checkModel(req.Model, name, "embeddings"); err != nil {
		return err
	}
	var inputs []string
	if err := json.Unmarshal(req.Input, &inputs); err != nil {
		var one string
		if err2 := json.Unmarshal(req.Input, &one); err2 != nil {
			var ids []json.RawMessage
			if json.Unmarshal(req.Input, &ids) == nil && len(ids) > 0 && !bytes.HasPrefix(bytes.TrimSpace(ids[0]), []byte(`"`)) {
				return unsupported("input", "token-id input is not supported: send text")
			}
			return fieldError("input", "want a string or a list of strings")
		}
		inputs = []string{one}
	}
	if len(inputs) == 0 {
		return fieldError("input", "empty")
	}
	if len(inputs) > s.opt.MaxSnippets {
		return &requestError{code: 413, param: "input", msg: fmt.Sprintf("field %q: %d texts, over the limit of %d per request (max-snippets)", "input", len(inputs), s.opt.MaxSnippets)}
	}
	for i, in := range inputs {
		if in == "" {
			return fieldError("input", "entry %d is empty", i)
		}
	}
	dim := s.eng.enc.Dim()
	if req.Dimensions != nil && *req.Dimensions != dim {
		return unsupported("dimensions", fmt.Sprintf("%d: this model's embeddings have %d dimensions and are not truncated", *req.Dimensions, dim))
	}
	b64 := false
	switch req.EncodingFormat {
	case "", "float":
	case "base64":
		b64 = true
	default:
		return fieldError("encoding_format", "%q, want float or base64", req.EncodingFormat)
	}
	var vecs [][]float32
	var err error
	switch req.InputType {
	case "", "document":
		vecs, err = s.benc.docsCtx(r.Context(), inputs)
	case "query":
		vecs, err = s.benc.queriesCtx(r.Context(), inputs)
	default:
		return fieldError("input_type", "%q, want document or query", req.InputType)
	}
	if err != nil {
		return err
	}
	data := make([]embeddingOut, len(vecs))
	for i, v := range vecs {
		data[i] = embeddingOut{Object: "embedding", Index: i, Embedding: v}
		if b64 {
			buf := make([]byte, 4*len(v))
			for j, x := range v {
				binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(x))
			}
			data[i].Embedding = base64.StdEncoding.EncodeToString(buf)
		}
	}
	tokens := 0
	if tz, ok := s.c.Encoder.(interface {
		Tokenize([]string) ([][]int, error)
	}); ok {
		if ids, err := tz.Tokenize(inputs); err == nil {
			for _, x := range ids {
				tokens += len(x)
			}
		}
	}
	writeJSON(w, 200, map[string]any{"object": "list", "model": name, "data": data,
		"usage": openai.EmbeddingUsage{PromptTokens: tokens, TotalTokens: tokens}})
	return nil
}
