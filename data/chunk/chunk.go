// Package chunk splits documents into overlapping chunks for retrieval with
// the semantics of LangChain's RecursiveCharacterTextSplitter
// (langchain_text_splitters/character.py, keep_separator=True,
// strip_whitespace=True, is_separator_regex=False), followed by whitespace
// collapsing as in the anatomical-pathology RAG paper (Pires, Perezhohin,
// Castelli, 2025: 512-character chunks, 128 overlap).
//
// The algorithm, as in LangChain:
//
//  1. _split_text: pick the first separator that occurs in the text ("" means
//     "split into characters"; if none occurs, the last separator, which then
//     leaves the text whole). Split the text before each occurrence, keeping
//     the separator at the start of the following piece; drop empty pieces.
//  2. Pieces shorter than Size are collected; a piece of length >= Size first
//     flushes the collected pieces through _merge_splits, then is split
//     recursively with the remaining separators, or, when none remain, is
//     emitted whole and unstripped even if longer than Size (LangChain logs
//     nothing here; Stats.Oversize counts such chunks).
//  3. _merge_splits: greedily concatenate pieces (joined with "") while the
//     total length stays <= Size; on emitting a chunk (stripped; dropped when
//     empty), drop whole pieces from the front while the total exceeds
//     Overlap, or while the next piece would not fit and the total is > 0.
//
// Lengths are Config.Length (default: Unicode code points, Python len).
// Stripping and collapsing use Python's notion of whitespace (str.isspace:
// Go's unicode.IsSpace plus U+001C..U+001F).
package chunk

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ragforge/ragforge/data"
)

// DefaultSeparators are the separators of the AP paper: paragraph, line,
// word, sentence. (LangChain's default list ends with "" instead of ".", so
// there a piece without spaces is cut into characters; here it stays whole.)
func DefaultSeparators() []string { return []string{"\n\n", "\n", " ", "."} }

// RuneLen is the default Config.Length: the number of Unicode code points,
// like Python's len(str). Invalid UTF-8 bytes count one each.
func RuneLen(s string) int { return utf8.RuneCountInString(s) }

// Config configures the splitter. Sizes are in units of Length (characters
// by default).
type Config struct {
	// Size is LangChain's chunk_size: the largest chunk the merge step
	// builds. Must be > 0.
	Size int
	// Overlap is LangChain's chunk_overlap: how much trailing text of one
	// chunk the next one may repeat. 0 <= Overlap < Size.
	Overlap int
	// Separators are tried in order, as literal strings ("" splits into
	// characters). Nil means DefaultSeparators().
	Separators []string
	// Length measures text; nil means RuneLen. Plug a tokenizer count here
	// for token-sized chunks (LangChain's length_function).
	Length func(string) int
}

// DefaultConfig is the AP paper's configuration: 512 characters, 128
// overlap, DefaultSeparators, RuneLen.
func DefaultConfig() Config {
	return Config{Size: 512, Overlap: 128, Separators: DefaultSeparators(), Length: RuneLen}
}

// Validate reports a configuration LangChain would reject or that cannot
// terminate.
func (c Config) Validate() error {
	switch {
	case c.Size <= 0:
		return fmt.Errorf("chunk config: field %q: must be > 0, got %d", "Size", c.Size)
	case c.Overlap < 0:
		return fmt.Errorf("chunk config: field %q: must be >= 0, got %d", "Overlap", c.Overlap)
	case c.Overlap >= c.Size:
		return fmt.Errorf("chunk config: field %q: must be < Size (%d), got %d", "Overlap", c.Size, c.Overlap)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Separators == nil {
		c.Separators = DefaultSeparators()
	}
	if c.Length == nil {
		c.Length = RuneLen
	}
	return c
}

// Piece is one chunk as LangChain's split_text returns it: Text equals
// text[Start:End] (byte offsets). Merged chunks are stripped of surrounding
// whitespace; a piece emitted whole because no separator is left is not.
type Piece struct {
	Text       string
	Start, End int
}

// SplitText splits text exactly as LangChain's
// RecursiveCharacterTextSplitter(chunk_size=Size, chunk_overlap=Overlap,
// separators=Separators, length_function=Length, keep_separator=True,
// strip_whitespace=True).split_text(text), and also returns where each chunk
// lies in text. Offsets are found while splitting: every split is a
// substring of its parent carried as a byte span, and a merged chunk is a
// contiguous run of splits, so its span runs from the first split's start
// to the last split's end, narrowed by the strip. No whitespace collapsing
// happens here. Errors: an invalid Config.
func SplitText(text string, cfg Config) ([]Piece, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := splitter{cfg: cfg, text: text, sepLen: cfg.Length("")}
	return s.split(0, len(text), cfg.Separators), nil
}

type span struct{ start, end int }

type splitter struct {
	cfg    Config
	text   string
	sepLen int // Length(""): keep_separator joins splits with ""
	out    []Piece
}

func (s *splitter) length(sp span) int { return s.cfg.Length(s.text[sp.start:sp.end]) }

// split is LangChain's _split_text on s.text[start:end].
func (s *splitter) split(start, end int, seps []string) []Piece {
	var final []Piece
	text := s.text[start:end]
	sep := seps[len(seps)-1]
	var next []string
	for i, c := range seps {
		if c == "" {
			sep = ""
			break
		}
		if strings.Contains(text, c) {
			sep, next = c, seps[i+1:]
			break
		}
	}
	var good []span
	for _, sp := range splitKeep(text, start, sep) {
		if s.length(sp) < s.cfg.Size {
			good = append(good, sp)
			continue
		}
		if len(good) > 0 {
			final = append(final, s.merge(good)...)
			good = nil
		}
		if len(next) == 0 {
			final = append(final, Piece{Text: s.text[sp.start:sp.end], Start: sp.start, End: sp.end})
		} else {
			final = append(final, s.split(sp.start, sp.end, next)...)
		}
	}
	if len(good) > 0 {
		final = append(final, s.merge(good)...)
	}
	return final
}

// splitKeep is _split_text_with_regex(text, re.escape(sep),
// keep_separator="start") on text located at byte offset off: cut before
// each non-overlapping occurrence of sep (leftmost first), or between
// characters when sep is "", and drop empty pieces.
func splitKeep(text string, off int, sep string) []span {
	var out []span
	if sep == "" {
		for i := 0; i < len(text); {
			_, w := utf8.DecodeRuneInString(text[i:])
			out = append(out, span{off + i, off + i + w})
			i += w
		}
		return out
	}
	prev := 0
	for pos := 0; ; {
		i := strings.Index(text[pos:], sep)
		if i < 0 {
			break
		}
		cut := pos + i
		if cut > prev {
			out = append(out, span{off + prev, off + cut})
		}
		prev = cut
		pos = cut + len(sep)
	}
	if len(text) > prev {
		out = append(out, span{off + prev, off + len(text)})
	}
	return out
}

// merge is LangChain's _merge_splits(splits, separator="").
func (s *splitter) merge(splits []span) []Piece {
	var docs []Piece
	var cur []span
	var curLen []int
	total := 0
	sepIf := func(cond bool) int {
		if cond {
			return s.sepLen
		}
		return 0
	}
	for _, d := range splits {
		l := s.length(d)
		if total+l+sepIf(len(cur) > 0) > s.cfg.Size {
			if len(cur) > 0 {
				if p, ok := s.join(cur); ok {
					docs = append(docs, p)
				}
				for len(cur) > 0 && (total > s.cfg.Overlap || (total+l+sepIf(len(cur) > 0) > s.cfg.Size && total > 0)) {
					total -= curLen[0] + sepIf(len(cur) > 1)
					cur, curLen = cur[1:], curLen[1:]
				}
			}
		}
		cur, curLen = append(cur, d), append(curLen, l)
		total += l + sepIf(len(cur) > 1)
	}
	if p, ok := s.join(cur); ok {
		docs = append(docs, p)
	}
	return docs
}

// join is LangChain's _join_docs: "".join(docs).strip(), None when empty.
// Consecutive splits are contiguous in s.text, so the join is a substring.
func (s *splitter) join(cur []span) (Piece, bool) {
	if len(cur) == 0 {
		return Piece{}, false
	}
	start, end := cur[0].start, cur[len(cur)-1].end
	raw := s.text[start:end]
	t := strings.TrimLeftFunc(raw, isSpace)
	start += len(raw) - len(t)
	t = strings.TrimRightFunc(t, isSpace)
	end = start + len(t)
	if t == "" {
		return Piece{}, false
	}
	return Piece{Text: t, Start: start, End: end}, true
}

// isSpace is Python's str.isspace for one code point.
func isSpace(r rune) bool {
	if r < utf8.RuneSelf {
		return r == ' ' || (r >= '\t' && r <= '\r') || (r >= 0x1c && r <= 0x1f)
	}
	return unicode.IsSpace(r)
}

// Collapse replaces each run of whitespace with one space and trims the
// ends, like Python's " ".join(s.split()) (the AP paper's post-processing).
func Collapse(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	pending := false // whitespace seen since the last word
	for i := 0; i < len(s); {
		r, w := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, w = utf8.DecodeRuneInString(s[i:])
		}
		if isSpace(r) {
			pending = b.Len() > 0
		} else {
			if pending {
				b.WriteByte(' ')
				pending = false
			}
			b.WriteString(s[i : i+w])
		}
		i += w
	}
	return b.String()
}

// Stats summarizes a SplitAll run.
type Stats struct {
	Docs   int // documents split
	Chunks int // chunks produced
	// Oversize counts chunks longer than Size (by Length, before
	// collapsing): pieces no separator could cut, which LangChain's
	// recursive splitter emits whole.
	Oversize int
	// Empty counts documents that produced no chunk (blank text).
	Empty int
}

// Split cuts doc into chunks: SplitText on doc.Text, then each piece's
// whitespace collapsed (Collapse); a piece that collapses to "" is dropped.
// Chunk i has ID "<doc.ID>#<i>", DocID doc.ID, Index i (0-based, counting
// kept chunks), Start/End the byte span of the uncollapsed piece in doc.Text
// (so Text == Collapse(doc.Text[Start:End])), and a shallow copy of doc.Meta.
// Errors: an invalid Config, an empty doc.ID.
func Split(doc data.Document, cfg Config) ([]data.Chunk, error) {
	chunks, _, err := split(doc, cfg)
	return chunks, err
}

func split(doc data.Document, cfg Config) ([]data.Chunk, int, error) {
	if doc.ID == "" {
		return nil, 0, errors.New("split: document with empty id")
	}
	pieces, err := SplitText(doc.Text, cfg)
	if err != nil {
		return nil, 0, fmt.Errorf("split %s: %w", doc.ID, err)
	}
	length := cfg.withDefaults().Length
	var chunks []data.Chunk
	oversize := 0
	for _, p := range pieces {
		if length(p.Text) > cfg.Size {
			oversize++
		}
		t := Collapse(p.Text)
		if t == "" {
			continue
		}
		chunks = append(chunks, data.Chunk{
			ID:    fmt.Sprintf("%s#%d", doc.ID, len(chunks)),
			DocID: doc.ID,
			Index: len(chunks),
			Text:  t,
			Start: p.Start,
			End:   p.End,
			Meta:  maps.Clone(doc.Meta),
		})
	}
	return chunks, oversize, nil
}

// SplitAll splits every document in order and concatenates the chunks.
// progress, if non-nil, is called after each document with (done, total)
// documents. Errors: an invalid Config (before any work), an empty or
// duplicate document id (naming its position).
func SplitAll(docs []data.Document, cfg Config, progress func(done, total int)) ([]data.Chunk, Stats, error) {
	var st Stats
	if err := cfg.Validate(); err != nil {
		return nil, st, err
	}
	seen := make(map[string]int, len(docs))
	var all []data.Chunk
	for i, d := range docs {
		if j, dup := seen[d.ID]; dup {
			return nil, st, fmt.Errorf("split: document %d: duplicate id %q (first at document %d)", i, d.ID, j)
		}
		seen[d.ID] = i
		chunks, over, err := split(d, cfg)
		if err != nil {
			return nil, st, fmt.Errorf("split: document %d: %w", i, err)
		}
		st.Docs++
		st.Chunks += len(chunks)
		st.Oversize += over
		if len(chunks) == 0 {
			st.Empty++
		}
		all = append(all, chunks...)
		if progress != nil {
			progress(i+1, len(docs))
		}
	}
	return all, st, nil
}
