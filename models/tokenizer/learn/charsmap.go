package learn

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"sync"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// nmtControl are the code points sentencepiece's nmt_nfkc rule deletes
// (normalizer Builder::BuildNmtNFKCMap: C0/C1 controls other than the
// whitespace ones).
var nmtControl = func() []rune {
	var r []rune
	for c := rune(0x01); c <= 0x08; c++ {
		r = append(r, c)
	}
	r = append(r, 0x0B)
	for c := rune(0x0E); c <= 0x1F; c++ {
		r = append(r, c)
	}
	return append(r, 0x7F, 0x8F, 0x9F)
}()

// nmtSpace are the code points nmt_nfkc maps to a space before NFKC.
var nmtSpace = []rune{
	0x0009, 0x000A, 0x000C, 0x000D, 0x1680, 0x200B, 0x200C, 0x200D, 0x200E,
	0x200F, 0x2028, 0x2029, 0x2581, 0xFEFF, 0xFFFD, 0x2007, 0x2008, 0x2009,
	0x200A, 0x202F, 0x205F, 0x3000,
}

// NMTNFKCRules returns the code point rules of NormNMTNFKC as a map from
// the UTF-8 of one code point to its replacement: the nmt controls map to
// "", the nmt spaces (tab, newline, CR, form feed, zero-width and other
// spaces, U+2581, U+FFFD) to " ", and every other code point c with
// NFKC(c) != c (golang.org/x/text/unicode/norm, Unicode 15) to NFKC(c).
//
// It differs from sentencepiece's compiled nmt_nfkc table, which is built with
// ICU and also has multi-code-point keys (canonical compositions such as
// "e\u0301" → "é"): here only single code points are rewritten, so NFD input
// stays decomposed.
func NMTNFKCRules() map[string]string {
	rules := map[string]string{}
	for c := rune(1); c <= utf8.MaxRune; c++ {
		if c == 0xD800 {
			c = 0xDFFF // surrogates are not characters
			continue
		}
		if c == 0x40000 {
			c = 0xDFFFF // planes 4-13 have no characters (Unicode 15)
			continue
		}
		var buf [utf8.UTFMax]byte
		b := buf[:utf8.EncodeRune(buf[:], c)]
		if norm.NFKC.IsNormal(b) {
			continue
		}
		s := string(b)
		if n := norm.NFKC.String(s); n != s {
			rules[s] = n
		}
	}
	for _, c := range nmtSpace {
		rules[string(c)] = " "
	}
	for _, c := range nmtControl {
		rules[string(c)] = ""
	}
	return rules
}

var nmtNFKC = sync.OnceValue(func() []byte {
	blob, err := BuildCharsmap(NMTNFKCRules())
	if err != nil {
		panic(fmt.Sprintf("train: build nmt_nfkc charsmap: %v", err)) // the rules are fixed: unreachable
	}
	return blob
})

// NMTNFKCCharsmap returns the precompiled charsmap of NMTNFKCRules (built
// once, then shared: do not modify).
func NMTNFKCCharsmap() []byte { return nmtNFKC() }

// BuildCharsmap compiles rewrite rules (key → replacement, keys non-empty
// and free of NUL bytes) into a sentencepiece precompiled charsmap, the
// format of NormalizerSpec.precompiled_charsmap: a uint32 little-endian size
// in bytes of a Darts-clone double array over the keys' UTF-8 bytes, the
// array's uint32 little-endian units, then the NUL-terminated replacements
// the leaf values point to. The normalizer applies the longest key that
// prefixes the remaining input (sentencepiece normalizer.cc, HF tokenizers'
// Precompiled). The array follows darts-clone's layout (256-unit blocks,
// unused units labelled so that no byte can match them), so sentencepiece
// and HF tokenizers read it as well.
func BuildCharsmap(rules map[string]string) ([]byte, error) {
	keys, err := charsmapKeys(rules)
	if err != nil {
		return nil, err
	}
	pool, values, err := replacementPool(rules, keys)
	if err != nil {
		return nil, err
	}
	d, err := buildDoubleArray(keyTrie(keys, values), len(keys))
	if err != nil {
		return nil, err
	}
	if err := d.labelUnused(); err != nil {
		return nil, err
	}
	out := make([]byte, 4, 4+4*len(d.units)+len(pool))
	binary.LittleEndian.PutUint32(out, uint32(4*len(d.units)))
	for _, u := range d.units {
		out = binary.LittleEndian.AppendUint32(out, u)
	}
	return append(out, pool...), nil
}

// charsmapKeys checks the rules and returns their keys, sorted.
func charsmapKeys(rules map[string]string) ([]string, error) {
	keys := make([]string, 0, len(rules))
	for k := range rules {
		if k == "" {
			return nil, fmt.Errorf("build charsmap: empty key")
		}
		for i := 0; i < len(k); i++ {
			if k[i] == 0 {
				return nil, fmt.Errorf("build charsmap: key %q: NUL byte", k)
			}
		}
		if slices.Contains([]byte(rules[k]), 0) {
			return nil, fmt.Errorf("build charsmap: replacement of %q: NUL byte", k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, nil
}

// replacementPool returns the NUL-terminated replacements, each string
// stored once, and the pool offset of each key's replacement.
func replacementPool(rules map[string]string, keys []string) ([]byte, []uint32, error) {
	var pool []byte
	at := map[string]uint32{}
	values := make([]uint32, len(keys))
	for i, k := range keys {
		v := rules[k]
		off, ok := at[v]
		if !ok {
			off = uint32(len(pool))
			at[v] = off
			pool = append(append(pool, v...), 0)
		}
		values[i] = off
	}
	if len(pool) >= 1<<31 {
		return nil, nil, fmt.Errorf("build charsmap: replacement pool too large")
	}
	return pool, values, nil
}

// charsmapNode is a node of the byte trie of the keys.
type charsmapNode struct {
	labels []byte
	kids   []*charsmapNode
	value  int64 // -1: no key ends here
}

// keyTrie builds the byte trie of the sorted keys, values[i] at the end of keys[i].
func keyTrie(keys []string, values []uint32) *charsmapNode {
	root := &charsmapNode{value: -1}
	for i, k := range keys {
		n := root
		for j := 0; j < len(k); j++ {
			var next *charsmapNode
			if l := len(n.labels); l > 0 && n.labels[l-1] == k[j] {
				next = n.kids[l-1] // keys are sorted: a shared prefix is the last child
			} else {
				next = &charsmapNode{value: -1}
				n.labels = append(n.labels, k[j])
				n.kids = append(n.kids, next)
			}
			n = next
		}
		n.value = int64(values[i])
	}
	return root
}

// Double array: a node at index pos with base b = pos ^ offset keeps its
// leaf value at b and its child with label c at b ^ c.
const (
	hasLeafBit = 1 << 8
	leafBit    = 1 << 31
	maxOffset  = 1 << 21 // offsets stored without darts' extension bit
)

// doubleArray is a darts-clone double array under construction.
type doubleArray struct {
	units      []uint32
	used       []bool
	usedBase   []bool
	blockBases []int // bases per 256-unit block: at most 255, so one low byte stays free
}

func (d *doubleArray) grow(n int) {
	for len(d.units) < n {
		d.units = append(d.units, 0)
		d.used = append(d.used, false)
		d.usedBase = append(d.usedBase, false)
	}
	for len(d.blockBases) < (n+255)/256 {
		d.blockBases = append(d.blockBases, 0)
	}
}

// buildDoubleArray lays out the trie at root breadth first; nkeys names the
// key count in errors.
func buildDoubleArray(root *charsmapNode, nkeys int) (*doubleArray, error) {
	d := &doubleArray{units: []uint32{0}, used: []bool{true}, usedBase: []bool{false}}
	hint := uint32(256)
	// leafHint: every base below it is unusable for a node with only a leaf
	// value (used, already a base, or in a full block) and stays so, since
	// slots, bases and block counts are only ever added.
	leafHint := uint32(256)
	type item struct {
		n   *charsmapNode
		pos uint32
	}
	queue := []item{{root, 0}}
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		n := it.n
		for int(hint) < len(d.used) && d.used[hint] {
			hint++
		}
		base := max(hint, 256) ^ uint32(firstLabel(n.labels, n.value >= 0))
		leafOnly := len(n.labels) == 0
		if leafOnly {
			base = leafHint
		}
		base = d.freeBase(n, base)
		if leafOnly {
			leafHint = base
		}
		off := it.pos ^ base
		if off >= maxOffset {
			return nil, fmt.Errorf("build charsmap: %d keys: double array too large", nkeys)
		}
		d.usedBase[base] = true
		d.blockBases[base>>8]++
		d.units[it.pos] |= off << 10
		if n.value >= 0 {
			d.units[base] = leafBit | uint32(n.value)
			d.used[base] = true
		}
		for i, c := range n.labels {
			p := base ^ uint32(c)
			u := uint32(c)
			if n.kids[i].value >= 0 {
				u |= hasLeafBit
			}
			d.units[p], d.used[p] = u, true
			queue = append(queue, item{n.kids[i], p})
		}
	}
	return d, nil
}

// freeBase returns the first base from base on where n's leaf value and
// children all land on free units, in a block with a base to spare.
func (d *doubleArray) freeBase(n *charsmapNode, base uint32) uint32 {
	for ; ; base++ {
		if base < 256 {
			continue
		}
		d.grow(int(base|0xFF) + 1)
		if d.blockBases[base>>8] >= 255 {
			base |= 0xFF // skip the rest of a full block
			continue
		}
		if d.usedBase[base] {
			continue
		}
		ok := n.value < 0 || !d.used[base]
		for _, c := range n.labels {
			ok = ok && !d.used[base^uint32(c)]
		}
		if ok {
			return base
		}
	}
}

// labelUnused labels every unused unit so that no base of its block reaches
// it with a matching byte: label = (index ^ u) & 0xFF for a low byte u no
// base of the block has.
func (d *doubleArray) labelUnused() error {
	for block := 0; block < len(d.units); block += 256 {
		var taken [256]bool
		for i := block; i < block+256; i++ {
			taken[i&0xFF] = d.usedBase[i]
		}
		u := slices.Index(taken[:], false)
		if u < 0 {
			return fmt.Errorf("build charsmap: block %d full", block/256)
		}
		for i := block; i < block+256; i++ {
			if !d.used[i] {
				d.units[i] = uint32((i ^ u) & 0xFF)
			}
		}
	}
	return nil
}

// firstLabel is the smallest slot label a node needs (0 for its leaf value).
func firstLabel(labels []byte, leaf bool) byte {
	if leaf || len(labels) == 0 {
		return 0
	}
	return labels[0]
}
