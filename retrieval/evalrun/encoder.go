package evalrun

import (
	"fmt"
	"io"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/retrieval/encode"
)

// Encoder says how a BERT bi-encoder encodes; `encode`, the dense
// retrievers of `eval` and `infer embed` share it, so a corpus encoded
// ahead of time and one encoded on the fly get the same vectors. Every
// setting defaults to what the encoder directory declares
// (encode.DirSettings: its sentence-transformers files); a setting given
// explicitly (Given) overrides that value, Resolve notes so, and Sources
// records which came from where.
type Encoder struct {
	Pooling       string `json:"pooling"`
	MaxLength     int    `json:"max_length"`
	BatchSize     int    `json:"batch_size"`
	QueryPrefix   string `json:"query_prefix"`
	PassagePrefix string `json:"passage_prefix"`
	Normalize     bool   `json:"normalize"`
	// Sources is where each setting came from (model, flag or default),
	// set by Resolve.
	Sources encode.Sources `json:"sources,omitzero"`

	// Given reports which settings (by flag name: "pooling", "max-length",
	// "query-prefix", "passage-prefix", "normalize") were set explicitly;
	// nil: none, every setting comes from the encoder directory.
	Given func(name string) bool `json:"-"`
	notes []string               // overrides Resolve found, printed by Apply
}

// DefaultEncoder is the CLI's defaults (512 tokens, batch 32, normalized),
// each replaced by the encoder directory's own by Resolve.
func DefaultEncoder() Encoder {
	return Encoder{MaxLength: encode.DefaultMaxLength, BatchSize: encode.DefaultBatchSize, Normalize: true}
}

// Check validates the settings.
func (o *Encoder) Check() error {
	if o.Pooling != "" && !bert.Pooling(o.Pooling).Valid() {
		return fmt.Errorf("--pooling %q: want cls or mean", o.Pooling)
	}
	if o.MaxLength < 2 {
		return fmt.Errorf("--max-length %d: want >= 2 ([CLS] and [SEP] need two tokens)", o.MaxLength)
	}
	if o.BatchSize < 1 {
		return fmt.Errorf("--batch-size %d: want >= 1", o.BatchSize)
	}
	return nil
}

func (o *Encoder) given(name string) bool { return o.Given != nil && o.Given(name) }

// Resolve fills the settings not given with what the encoder directory dir
// declares (encode.DirSettings), records each one's source, and keeps a
// note for every given setting that overrides the directory's value.
// Errors: malformed sentence-transformers files.
func (o *Encoder) Resolve(dir string) error {
	s, src, err := encode.DirSettings(dir)
	if err != nil {
		return err
	}
	o.notes = nil
	// got is the given value (before set replaces it), model the directory's.
	for _, v := range []struct {
		flag, name, got, model string
		set                    func()
	}{
		{"pooling", "pooling", shown(o.Pooling), shown(string(s.Pooling)), func() { o.Pooling = string(s.Pooling) }},
		{"normalize", "normalize", shown(o.Normalize), shown(s.Normalize), func() { o.Normalize = s.Normalize }},
		{"max-length", "max_length", shown(o.MaxLength), shown(s.MaxLength), func() { o.MaxLength = s.MaxLength }},
		{"query-prefix", "query_prefix", shown(o.QueryPrefix), shown(s.QueryPrefix), func() { o.QueryPrefix = s.QueryPrefix }},
		{"passage-prefix", "passage_prefix", shown(o.PassagePrefix), shown(s.PassagePrefix), func() { o.PassagePrefix = s.PassagePrefix }},
	} {
		if !o.given(v.flag) {
			v.set()
			continue
		}
		from := "the model's"
		if src.Get(v.name) == encode.SourceDefault {
			from = "ragforge's default"
		}
		o.notes = append(o.notes, fmt.Sprintf("encoder %s: --%s %s overrides %s %s", dir, v.flag, v.got, from, v.model))
		src.Set(v.name, encode.SourceFlag)
	}
	o.Sources = src
	return nil
}

// shown writes a setting's value for a message: strings quoted.
func shown(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(v)
}

// Settings are the options as encode.Settings.
func (o *Encoder) Settings() encode.Settings {
	return encode.Settings{Pooling: bert.Pooling(o.Pooling), Normalize: o.Normalize, MaxLength: o.MaxLength,
		QueryPrefix: o.QueryPrefix, PassagePrefix: o.PassagePrefix}
}

// Apply sets the options (resolved against the encoder's directory) on enc
// and prints to w (nil: nowhere) the given settings that overrode the
// directory's.
func (o *Encoder) Apply(enc *encode.BERTEncoder, w io.Writer) {
	enc.Apply(o.Settings())
	enc.BatchSize = o.BatchSize
	for _, n := range o.notes {
		fmt.Fprintln(orDiscard(w), n)
	}
	o.notes = nil
}

// MatchInfo configures enc (loaded from dir) to encode queries as the
// pre-encoded corpus was encoded (info), so its vectors and the query
// vectors are comparable. A given setting with another value than info's
// is an error, as is an encoder whose weights differ from the corpus's.
func (o *Encoder) MatchInfo(enc *encode.BERTEncoder, dir string, info *data.EncodeInfo) error {
	if info == nil {
		return nil
	}
	sum, err := encode.WeightsSHA256(dir)
	if err != nil {
		return err
	}
	if info.WeightsSHA256 != "" && sum != "" && sum != info.WeightsSHA256 {
		return fmt.Errorf("--encoder %s: weights differ from those the corpus was encoded with (%s, sha256 %s)", dir, info.Encoder, info.WeightsSHA256)
	}
	conflicts := []struct {
		flag      string
		got, want any
	}{
		{"pooling", string(enc.Pooling), info.Pooling},
		{"max-length", enc.MaxTokens(), info.MaxLength},
		{"query-prefix", o.QueryPrefix, info.QueryPrefix},
		{"passage-prefix", o.PassagePrefix, info.PassagePrefix},
		{"normalize", o.Normalize, info.Normalize},
	}
	for _, c := range conflicts {
		if o.given(c.flag) && c.got != c.want {
			return fmt.Errorf("--%s %v: the pre-encoded corpus was encoded with %v (%s)", c.flag, c.got, c.want, data.EncodeInfoFile)
		}
	}
	if p := bert.Pooling(info.Pooling); p.Valid() {
		enc.Pooling = p
	} else if info.Pooling != "" {
		return fmt.Errorf("%s: field %q: %q, want cls or mean", data.EncodeInfoFile, "pooling", info.Pooling)
	}
	if info.MaxLength > 0 {
		enc.MaxLength = info.MaxLength
	}
	enc.QueryInstruction, enc.DocInstruction, enc.Normalize = info.QueryPrefix, info.PassagePrefix, info.Normalize
	return nil
}
