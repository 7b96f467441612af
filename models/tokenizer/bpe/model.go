package bpe

import (
	"container/heap"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
)

// model is HF tokenizers' BPE model over the byte-level alphabet: a
// vocabulary, merges ranked by their order in the file, and a cache of
// encoded pre-tokens.
type model struct {
	vocab  map[string]int
	tokens []string // id → token; "" where the id is unused
	// merges maps a pair of ids (left<<32 | right) to its rank and result.
	merges       map[uint64]merge
	ignoreMerges bool
	unkID        int // -1: none
	byteIDs      [256]int

	mu    sync.RWMutex
	cache map[string][]piece
}

type merge struct{ rank, id int32 }

// piece is one token of an encoded pre-token: its id and its [start, end)
// byte span in the pre-token.
type piece struct{ id, start, end int }

// cacheCapacity bounds the pre-token cache (HF tokenizers' DEFAULT_CACHE_CAPACITY).
const cacheCapacity = 10000

func pairKey(a, b int) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// newModel reads tokenizer.json's "model" node of type BPE. Merges may be
// "a b" strings (tokenizers < 0.20) or ["a", "b"] pairs; each merge's parts
// and result must be in the vocabulary. dropout, a continuing_subword_prefix
// or an end_of_word_suffix are refused: byte-level tokenizers use none.
func newModel(raw json.RawMessage) (*model, error) {
	var m struct {
		Type                    string            `json:"type"`
		Dropout                 *float64          `json:"dropout"`
		UnkToken                *string           `json:"unk_token"`
		ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
		FuseUnk                 bool              `json:"fuse_unk"`
		ByteFallback            bool              `json:"byte_fallback"`
		IgnoreMerges            bool              `json:"ignore_merges"`
		Vocab                   map[string]int    `json:"vocab"`
		Merges                  []json.RawMessage `json:"merges"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("field %q: %w", "model", err)
	}
	switch {
	case m.Type != "BPE":
		return nil, fmt.Errorf("field %q: %q, want BPE", "model.type", m.Type)
	case m.Dropout != nil && *m.Dropout != 0:
		return nil, fmt.Errorf("field %q: %v not supported (deterministic encoding only)", "model.dropout", *m.Dropout)
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return nil, fmt.Errorf("field %q: %q not supported (byte-level BPE has none)", "model.continuing_subword_prefix", *m.ContinuingSubwordPrefix)
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return nil, fmt.Errorf("field %q: %q not supported (byte-level BPE has none)", "model.end_of_word_suffix", *m.EndOfWordSuffix)
	case m.ByteFallback:
		return nil, fmt.Errorf("field %q: true not supported (byte-level BPE needs no fallback)", "model.byte_fallback")
	}
	md := &model{vocab: m.Vocab, ignoreMerges: m.IgnoreMerges, unkID: -1, cache: map[string][]piece{}}
	maxID := -1
	for tok, id := range m.Vocab {
		if id < 0 {
			return nil, fmt.Errorf("field %q: token %q has id %d", "model.vocab", tok, id)
		}
		maxID = max(maxID, id)
	}
	md.tokens = make([]string, maxID+1)
	for tok, id := range m.Vocab {
		md.tokens[id] = tok
	}
	if m.UnkToken != nil {
		id, ok := m.Vocab[*m.UnkToken]
		if !ok {
			return nil, fmt.Errorf("field %q: %q not in the vocabulary", "model.unk_token", *m.UnkToken)
		}
		md.unkID = id
	}
	for b := range 256 {
		id, ok := m.Vocab[byteString[b]]
		if !ok {
			if md.unkID < 0 {
				return nil, fmt.Errorf("field %q: byte 0x%02x (%q) missing and no unk_token", "model.vocab", b, byteString[b])
			}
			id = md.unkID
		}
		md.byteIDs[b] = id
	}
	md.merges = make(map[uint64]merge, len(m.Merges))
	for rank, raw := range m.Merges {
		var a, b string
		var pair []string
		if err := json.Unmarshal(raw, &pair); err == nil {
			if len(pair) != 2 {
				return nil, fmt.Errorf("field %q: entry %d: %d parts, want 2", "model.merges", rank, len(pair))
			}
			a, b = pair[0], pair[1]
		} else {
			var line string
			if err := json.Unmarshal(raw, &line); err != nil {
				return nil, fmt.Errorf("field %q: entry %d: neither \"a b\" nor [a, b]: %s", "model.merges", rank, raw)
			}
			parts := strings.Split(line, " ")
			if len(parts) != 2 {
				return nil, fmt.Errorf("field %q: entry %d: %q is not two tokens separated by one space", "model.merges", rank, line)
			}
			a, b = parts[0], parts[1]
		}
		ia, okA := m.Vocab[a]
		ib, okB := m.Vocab[b]
		ir, okR := m.Vocab[a+b]
		if !okA || !okB || !okR {
			return nil, fmt.Errorf("field %q: entry %d: merge %q + %q: a part or the result is not in the vocabulary", "model.merges", rank, a, b)
		}
		k := pairKey(ia, ib)
		if _, dup := md.merges[k]; !dup { // the first (lowest) rank wins, as in HF
			md.merges[k] = merge{int32(rank), int32(ir)}
		}
	}
	return md, nil
}

// encode returns the tokens of one pre-token s (normalized text, not yet in
// the byte alphabet), from the cache when it was seen before.
func (m *model) encode(s string) []piece {
	m.mu.RLock()
	p, ok := m.cache[s]
	m.mu.RUnlock()
	if ok {
		return p
	}
	p = m.merge(s)
	m.mu.Lock()
	if len(m.cache) < cacheCapacity {
		m.cache[s] = p
	}
	m.mu.Unlock()
	return p
}

// symbol is a live span of the word being merged, linked to its neighbours.
type symbol struct {
	id, start, end int
	prev, next     int // -1 at the ends
}

// candidate is a possible merge of symbols[pos] with its right neighbour.
type candidate struct {
	rank, pos, id int
}

type candidates []candidate

func (c candidates) Len() int { return len(c) }
func (c candidates) Less(i, j int) bool {
	if c[i].rank != c[j].rank {
		return c[i].rank < c[j].rank
	}
	return c[i].pos < c[j].pos
}
func (c candidates) Swap(i, j int) { c[i], c[j] = c[j], c[i] }
func (c *candidates) Push(x any)   { *c = append(*c, x.(candidate)) }
func (c *candidates) Pop() any {
	old := *c
	x := old[len(old)-1]
	*c = old[:len(old)-1]
	return x
}

// merge runs BPE on s: start from one symbol per byte, then repeatedly apply
// the lowest-ranked merge present, leftmost first (HF word.merge_all). With
// ignore_merges, a pre-token that is itself in the vocabulary is one token.
func (m *model) merge(s string) []piece {
	if m.ignoreMerges {
		if id, ok := m.vocab[byteLevel(s)]; ok {
			return []piece{{id, 0, len(s)}}
		}
	}
	syms := make([]symbol, len(s))
	for i := 0; i < len(s); i++ {
		syms[i] = symbol{id: m.byteIDs[s[i]], start: i, end: i + 1, prev: i - 1, next: i + 1}
	}
	if len(syms) > 0 {
		syms[len(syms)-1].next = -1
	}
	var q candidates
	for i := 0; i+1 < len(syms); i++ {
		if mg, ok := m.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			q = append(q, candidate{int(mg.rank), i, int(mg.id)})
		}
	}
	heap.Init(&q)
	for q.Len() > 0 {
		c := heap.Pop(&q).(candidate)
		l := &syms[c.pos]
		if l.end == l.start || l.next < 0 { // merged away, or now last
			continue
		}
		r := &syms[l.next]
		if mg, ok := m.merges[pairKey(l.id, r.id)]; !ok || int(mg.id) != c.id {
			continue // stale: a neighbour changed since this was queued
		}
		l.id, l.end = c.id, r.end
		r.start = r.end // mark merged
		l.next = r.next
		if l.next >= 0 {
			syms[l.next].prev = c.pos
			if mg, ok := m.merges[pairKey(l.id, syms[l.next].id)]; ok {
				heap.Push(&q, candidate{int(mg.rank), c.pos, int(mg.id)})
			}
		}
		if l.prev >= 0 {
			if mg, ok := m.merges[pairKey(syms[l.prev].id, l.id)]; ok {
				heap.Push(&q, candidate{int(mg.rank), l.prev, int(mg.id)})
			}
		}
	}
	var out []piece
	for i := 0; i >= 0 && i < len(syms); i = syms[i].next {
		out = append(out, piece{syms[i].id, syms[i].start, syms[i].end})
	}
	return out
}
