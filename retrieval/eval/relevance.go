package eval

import (
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/ragforge/ragforge/data"
)

// MinSharedRun is the AP paper's run length: a chunk is relevant when it
// shares at least this many consecutive whitespace tokens with the reference
// context.
const MinSharedRun = 5

// Normalize applies the AP paper's text normalization used by the relevance
// rules: lower-case (unicode.ToLower per rune), strip diacritics (Unicode NFD
// decomposition, then drop every rune of category Mn), and collapse every run
// of Unicode white space to one ASCII space, with no leading or trailing space.
//
// NFD is applied rune by rune; because combining marks are dropped afterwards
// this equals whole-string NFD for all text whose combining marks are Mn.
func Normalize(s string) string {
	n, _ := normalizeMap(s, false)
	return n
}

// normalizeMap normalizes s as Normalize does. When withMap is true it also
// returns, for every byte j of the result, the byte offset in s of the source
// rune that produced it (offsets[j]); the inserted single spaces map to the
// first white-space rune of the collapsed run.
func normalizeMap(s string, withMap bool) (string, []int32) {
	var b strings.Builder
	b.Grow(len(s))
	var offsets []int32
	if withMap {
		offsets = make([]int32, 0, len(s))
	}
	var buf []byte
	pendingSpace := -1 // source offset of the first space of a pending run
	for i, r := range s {
		if unicode.IsSpace(r) {
			if pendingSpace < 0 {
				pendingSpace = i
			}
			continue
		}
		r = unicode.ToLower(r)
		var out []byte
		if r < utf8.RuneSelf {
			buf = append(buf[:0], byte(r))
			out = buf
		} else {
			buf = norm.NFD.AppendString(buf[:0], string(r))
			out = buf
		}
		wrote := false
		for len(out) > 0 {
			c, w := utf8.DecodeRune(out)
			seg := out[:w]
			out = out[w:]
			if unicode.Is(unicode.Mn, c) {
				continue
			}
			if !wrote && pendingSpace >= 0 {
				if b.Len() > 0 {
					b.WriteByte(' ')
					if withMap {
						offsets = append(offsets, int32(pendingSpace))
					}
				}
				pendingSpace = -1
			}
			wrote = true
			b.Write(seg)
			if withMap {
				for range seg {
					offsets = append(offsets, int32(i))
				}
			}
		}
	}
	return b.String(), offsets
}

// ContainsEvidence is the AP paper's relevance rule (Pires et al. 2025, top-k
// protocol): after Normalize, chunk is relevant to the reference context when
// the context is a substring of the chunk, or when both share a run of at least
// MinSharedRun (5) consecutive whitespace-separated tokens. An empty context is
// never contained.
func ContainsEvidence(context, chunk string) bool {
	return containsNormalized(Normalize(context), Normalize(chunk))
}

func containsNormalized(nc, nk string) bool {
	if nc == "" {
		return false
	}
	if strings.Contains(nk, nc) {
		return true
	}
	ct := strings.Fields(nc)
	if len(ct) < MinSharedRun {
		return false
	}
	grams := make(map[string]struct{}, len(ct))
	for i := 0; i+MinSharedRun <= len(ct); i++ {
		grams[strings.Join(ct[i:i+MinSharedRun], " ")] = struct{}{}
	}
	kt := strings.Fields(nk)
	for i := 0; i+MinSharedRun <= len(kt); i++ {
		if _, ok := grams[strings.Join(kt[i:i+MinSharedRun], " ")]; ok {
			return true
		}
	}
	return false
}

// EvidenceSpans locates the reference context in a source document for the
// evidence-aware protocol (breast-lesion study: every chunk covering the
// evidence is an accepted answer). Both texts are normalized with Normalize;
// every non-overlapping exact occurrence of the normalized context in the
// normalized document, scanned left to right, is mapped back to a [start, end)
// byte range of doc: start is the first byte of the source rune producing the
// occurrence's first byte, end is the byte after the source rune producing its
// last byte. Spans are in increasing order. A context that does not occur
// verbatim (after normalization) yields no spans: paraphrases are not matched.
func EvidenceSpans(doc, context string) [][2]int {
	nd, off := normalizeMap(doc, true)
	return spansIn(doc, nd, off, Normalize(context))
}

func spansIn(doc, nd string, off []int32, nc string) [][2]int {
	if nc == "" {
		return nil
	}
	var spans [][2]int
	for from := 0; from+len(nc) <= len(nd); {
		i := strings.Index(nd[from:], nc)
		if i < 0 {
			break
		}
		s := from + i
		last := int(off[s+len(nc)-1])
		_, w := utf8.DecodeRuneInString(doc[last:])
		spans = append(spans, [2]int{int(off[s]), last + w})
		from = s + len(nc)
	}
	return spans
}

// RelevanceFunc judges whether chunk c is relevant to query q.
type RelevanceFunc func(q data.Query, c data.Chunk) bool

// Rule selects one of the built-in chunk relevance rules for BuildQrels. The
// zero Rule is the AP paper's rule (ContainsEvidence on Query.Context and
// Chunk.Text). A Rule with Evidence set is the evidence-span rule: a chunk is
// relevant when its [Start, End) span in its document overlaps (by at least one
// byte) a span returned by EvidenceSpans(document text, Query.Context); Docs
// must then hold every chunk's document. The third rule of the study, BEIR
// qrels, needs no building: load the qrels and call Evaluate.
type Rule struct {
	Evidence bool
	Docs     []data.Document
}

// SpanRule returns the evidence-span rule over docs.
func SpanRule(docs []data.Document) Rule { return Rule{Evidence: true, Docs: docs} }

// Func returns the rule as a per-pair RelevanceFunc (the reference
// definition; BuildQrels computes the same judgments with an index). For the
// span rule a chunk whose document is not in Docs is not relevant.
func (r Rule) Func() RelevanceFunc {
	if !r.Evidence {
		return func(q data.Query, c data.Chunk) bool { return ContainsEvidence(q.Context, c.Text) }
	}
	texts := make(map[string]string, len(r.Docs))
	for _, d := range r.Docs {
		texts[d.ID] = d.Text
	}
	return func(q data.Query, c data.Chunk) bool {
		t, ok := texts[c.DocID]
		if !ok {
			return false
		}
		return overlapsAny(c, EvidenceSpans(t, q.Context))
	}
}

func overlapsAny(c data.Chunk, spans [][2]int) bool {
	for _, s := range spans {
		if c.Start < s[1] && s[0] < c.End {
			return true
		}
	}
	return false
}

// BuildQrels judges every (query, chunk) pair with rule and returns chunk-level
// qrels: qrels[query id][chunk id] = 1 for each relevant chunk. Every query
// appears, with an empty map when no chunk is relevant, so that Evaluate
// scores it 0 and lists it in Report.Unjudged.
//
// The AP rule is computed with an inverted index from hashes of normalized
// 5-token runs to chunks; candidates are verified exactly, and contexts of
// fewer than 7 tokens (whose substring matches need not share a whole 5-token
// run) are also checked by substring search over all normalized chunks. The
// span rule normalizes each document once and searches each context in the
// documents that have chunks.
//
// Errors: a query with an empty ID, duplicate query or chunk ids, and for the
// span rule a chunk whose DocID is not in Rule.Docs or whose span lies outside
// its document's text.
func BuildQrels(queries []data.Query, chunks []data.Chunk, rule Rule) (data.Qrels, error) {
	seenQ := make(map[string]bool, len(queries))
	for i, q := range queries {
		if q.ID == "" {
			return nil, fmt.Errorf("build qrels: query %d: field %q: empty", i, "ID")
		}
		if seenQ[q.ID] {
			return nil, fmt.Errorf("build qrels: query %d: field %q: duplicate id %q", i, "ID", q.ID)
		}
		seenQ[q.ID] = true
	}
	seenC := make(map[string]bool, len(chunks))
	for i, c := range chunks {
		if seenC[c.ID] {
			return nil, fmt.Errorf("build qrels: chunk %d: field %q: duplicate id %q", i, "ID", c.ID)
		}
		seenC[c.ID] = true
	}
	if rule.Evidence {
		return buildSpanQrels(queries, chunks, rule.Docs)
	}
	return buildContainsQrels(queries, chunks), nil
}

func gramHash(toks []string) uint64 {
	h := fnv.New64a()
	for i, t := range toks {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(t))
	}
	return h.Sum64()
}

func buildContainsQrels(queries []data.Query, chunks []data.Chunk) data.Qrels {
	norms := make([]string, len(chunks))
	index := make(map[uint64][]int32)
	for ci, c := range chunks {
		norms[ci] = Normalize(c.Text)
		toks := strings.Fields(norms[ci])
		for i := 0; i+MinSharedRun <= len(toks); i++ {
			h := gramHash(toks[i : i+MinSharedRun])
			p := index[h]
			if n := len(p); n == 0 || p[n-1] != int32(ci) {
				index[h] = append(p, int32(ci))
			}
		}
	}
	qrels := make(data.Qrels, len(queries))
	for _, q := range queries {
		rel := map[string]int{}
		qrels[q.ID] = rel
		nc := Normalize(q.Context)
		if nc == "" {
			continue
		}
		toks := strings.Fields(nc)
		cand := map[int32]bool{}
		for i := 0; i+MinSharedRun <= len(toks); i++ {
			for _, ci := range index[gramHash(toks[i:i+MinSharedRun])] {
				cand[ci] = true
			}
		}
		for ci := range cand {
			if containsNormalized(nc, norms[ci]) {
				rel[chunks[ci].ID] = 1
			}
		}
		if len(toks) < MinSharedRun+2 {
			for ci, nk := range norms {
				if strings.Contains(nk, nc) {
					rel[chunks[ci].ID] = 1
				}
			}
		}
	}
	return qrels
}

func buildSpanQrels(queries []data.Query, chunks []data.Chunk, docs []data.Document) (data.Qrels, error) {
	type normDoc struct {
		text, norm string
		off        []int32
		chunks     []int
	}
	byID := make(map[string]*normDoc, len(docs))
	for _, d := range docs {
		byID[d.ID] = &normDoc{text: d.Text}
	}
	var order []string
	for ci, c := range chunks {
		d, ok := byID[c.DocID]
		if !ok {
			return nil, fmt.Errorf("build qrels: chunk %d (%s): field %q: document %q not in Rule.Docs", ci, c.ID, "DocID", c.DocID)
		}
		if c.Start < 0 || c.End < c.Start || c.End > len(d.text) {
			return nil, fmt.Errorf("build qrels: chunk %d (%s): field %q: span [%d,%d) outside document of %d bytes", ci, c.ID, "Start/End", c.Start, c.End, len(d.text))
		}
		if d.chunks == nil {
			order = append(order, c.DocID)
		}
		d.chunks = append(d.chunks, ci)
	}
	sort.Strings(order)
	for _, id := range order {
		d := byID[id]
		d.norm, d.off = normalizeMap(d.text, true)
	}
	qrels := make(data.Qrels, len(queries))
	for _, q := range queries {
		rel := map[string]int{}
		qrels[q.ID] = rel
		nc := Normalize(q.Context)
		if nc == "" {
			continue
		}
		for _, id := range order {
			d := byID[id]
			spans := spansIn(d.text, d.norm, d.off, nc)
			if len(spans) == 0 {
				continue
			}
			for _, ci := range d.chunks {
				if overlapsAny(chunks[ci], spans) {
					rel[chunks[ci].ID] = 1
				}
			}
		}
	}
	return qrels, nil
}
