package generate

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/ragforge/ragforge/models/decoder"
	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/models/openai"
)

// Spec is a parsed generator specification.
type Spec struct {
	Kind  string // "ict", "t5", "hf", "openai", or a decoder model_type (llama, qwen2, qwen3)
	Dir   string // t5, hf, decoder: checkpoint directory
	URL   string // openai: base URL
	Model string // openai: model name (after '#'), may be empty
}

// String formats the spec back ("ict", "t5:<dir>", "hf:<dir>",
// "openai:<url>[#model]").
func (s Spec) String() string {
	switch {
	case s.Kind == "t5" || s.Kind == "hf" || isDecoderKind(s.Kind):
		return s.Kind + ":" + s.Dir
	case s.Kind == "openai":
		if s.Model != "" {
			return "openai:" + s.URL + "#" + s.Model
		}
		return "openai:" + s.URL
	}
	return s.Kind
}

// isDecoderKind reports whether kind is a decoder model_type used as a
// spec alias ("qwen2:DIR").
func isDecoderKind(kind string) bool {
	_, ok := decoder.Families[kind]
	return ok
}

// ParseGeneratorSpec parses "ict", "t5:<dir>", "hf:<dir>" (any model
// directory lm.Load takes, by its config.json model_type: t5, llama, qwen2,
// qwen3), a decoder alias "<model_type>:<dir>" ("qwen2:<dir>",
// "llama:<dir>", "qwen3:<dir>": hf:<dir> that Open checks against
// config.json) or "openai:<url>[#model]" (url with http or https scheme and
// a host). Errors name the spec.
func ParseGeneratorSpec(spec string) (Spec, error) {
	kind, rest, _ := strings.Cut(spec, ":")
	switch kind {
	case "ict":
		if rest != "" {
			return Spec{}, fmt.Errorf("generator %q: ict takes no argument", spec)
		}
		return Spec{Kind: "ict"}, nil
	case "t5", "hf":
		if rest == "" {
			return Spec{}, fmt.Errorf("generator %q: want %s:<model dir>", spec, kind)
		}
		return Spec{Kind: kind, Dir: rest}, nil
	case "openai":
		u, model, _ := strings.Cut(rest, "#")
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return Spec{}, fmt.Errorf("generator %q: want openai:<http(s) url>[#model]", spec)
		}
		return Spec{Kind: "openai", URL: u, Model: model}, nil
	}
	if isDecoderKind(kind) {
		if rest == "" {
			return Spec{}, fmt.Errorf("generator %q: want %s:<model dir>", spec, kind)
		}
		return Spec{Kind: kind, Dir: rest}, nil
	}
	return Spec{}, fmt.Errorf("generator %q: unknown kind %q (want ict, t5:<dir>, hf:<dir>, %s:<dir> or openai:<url>[#model])", spec, kind, strings.Join(decoder.ModelTypes(), ":<dir>, "))
}

// Open builds the generator of spec: ICT{}, lm.LoadT5(spec.Dir,
// backendName), lm.Load(spec.Dir, backendName), lm.LoadDecoder for a
// decoder alias whose config.json model_type is the alias (a mismatch is
// an error naming both), or an lm.OpenAI over openai.New(spec.URL, opt)
// with opt.Model = spec.Model when set.
func Open(spec Spec, backendName string, opt openai.Options) (lm.Generator, error) {
	if isDecoderKind(spec.Kind) {
		mt, err := hf.ModelType(spec.Dir)
		if err != nil {
			return nil, fmt.Errorf("generator %q: %w", spec.String(), err)
		}
		if mt != spec.Kind {
			return nil, fmt.Errorf("generator %q: %s/config.json has model_type %q, not %q (use %s:%s or hf:%s)", spec.String(), spec.Dir, mt, spec.Kind, mt, spec.Dir, spec.Dir)
		}
		return lm.LoadDecoder(spec.Dir, backendName)
	}
	switch spec.Kind {
	case "ict":
		return ICT{}, nil
	case "t5":
		return lm.LoadT5(spec.Dir, backendName)
	case "hf":
		return lm.Load(spec.Dir, backendName)
	case "openai":
		if spec.Model != "" {
			opt.Model = spec.Model
		}
		return &lm.OpenAI{Client: openai.New(spec.URL, opt)}, nil
	}
	return nil, fmt.Errorf("generator %q: unknown kind", spec.String())
}
