package chunk

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/internal/testutil"
)

// golden is the content of testdata/<case>.golden. Every golden file was
// written by tracing LangChain's _split_text/_merge_splits by hand (see the
// trace notes on each case), not by running this package.
type golden struct {
	Oversize int          `json:"oversize"`
	Chunks   []data.Chunk `json:"chunks"`
}

func byteLen(s string) int { return len(s) }

func TestSplitGolden(t *testing.T) {
	cases := []struct {
		name string
		text string
		cfg  Config
		meta map[string]any
		// trace: the hand derivation behind the golden file.
		trace string
	}{
		{"overlap_words", "aaa bbb ccc ddd eee", Config{Size: 10, Overlap: 4}, map[string]any{"src": "t"},
			`split " ": aaa| bbb| ccc| ddd| eee (3,4,4,4,4); merge: 3+4=7, +4=11>10 emit "aaa bbb", drop aaa (7>4) -> 4; ... each chunk keeps the previous word as overlap`},
		{"no_separator_long", "abcdefghijklmnop", Config{Size: 10, Overlap: 2}, nil,
			`no separator occurs -> separator "." (last), no new separators; 16>=10 so the piece is appended whole, unstripped`},
		{"paragraphs_recursive", "Intro\n\nalpha beta gamma delta\nend\n\nok", Config{Size: 20, Overlap: 5}, nil,
			`"\n\n": Intro(5) | "\n\nalpha beta gamma delta\nend"(28) | "\n\nok"(4); 28>=20 flushes [Intro] then recurses on "\n": "\n" | "\nalpha beta gamma delta"(23) | "\nend"; 23 recurses on " ": merge emits "alpha beta gamma" (17), drops all (each piece > overlap 5), then "delta"; "\nend" and "\n\nok" are merged separately (different recursion levels)`},
		{"portuguese_runes", "Coração não é órgão.", Config{Size: 11, Overlap: 4}, nil,
			`rune lengths Coração 7, " não" 4, " é" 2, " órgão." 7: 7+4=11<=11; +2 >11 emit, drop Coração -> 4; +2=6; +7=13>11 emit " não é", drop " não" -> 2, 2+7<=11 keep; end " é órgão."`},
		{"portuguese_bytes", "Coração não é órgão.", Config{Size: 11, Overlap: 4, Length: byteLen}, nil,
			`byte lengths 9, 5, 3, 9: 9+5>11 emit Coração, drop -> 0; 5+3=8; +9>11 emit " não é", drop " não" -> 3, 3+9>11 and 3>0 drop " é"; end "órgão."`},
		{"long_word_among_short", "ab cd efghijklmnopq rs", Config{Size: 8, Overlap: 2}, nil,
			`" ": ab | " cd" | " efghijklmnopq"(14) | " rs"; 14>=8 flushes "ab cd", recursion on ["."] finds nothing -> appended whole and unstripped [5,19); "rs" stripped`},
		{"period_kept_at_start", "uma.duas.tres.quatro", Config{Size: 10, Overlap: 3}, nil,
			`".": uma | .duas | .tres | .quatro (3,5,5,7): 3+5=8, +5>10 emit, drop both (8>3, 5>3); ".tres" alone since 5+7>10`},
		{"collapse_whitespace", "  \n\nHello\tworld  \n\n  a\tb  c\nd e", Config{Size: 14, Overlap: 0}, nil,
			`"\n\n": "  " | "\n\nHello\tworld  "(15) | "\n\n  a\tb  c\nd e"(14); both long pieces recurse; merges strip to "Hello\tworld" [4,15) and "a\tb  c\nd e" [21,31); collapsing turns tabs/newlines/double spaces into one space`},
		{"exact_size_piece", "xy\nabcdefgh", Config{Size: 9, Overlap: 2}, nil,
			`"\n": xy | "\nabcdefgh"(9); 9 is not < 9 so it is not merged: it recurses, no separator left, appended unstripped [2,11) (merged it would be stripped to [3,11)); 9 is not > Size so not oversize`},
		{"char_separator", "ãbcdé", Config{Size: 3, Overlap: 1, Separators: []string{" ", ""}}, nil,
			`"" splits into characters (ã is 2 bytes): 1+1+1=3, +1>3 emit "ãbc" [0,4), drop ã, b (3>1, 2>1) -> 1; "cdé" [3,7)`},
		{"blank", "   \n\n  ", Config{Size: 10, Overlap: 2}, nil,
			`"\n\n": "   " | "\n\n  "; merged and stripped to "" -> no chunk`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", tc.name+".golden"))
			if err != nil {
				t.Fatal(err)
			}
			var want golden
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatalf("%s.golden: %v", tc.name, err)
			}
			doc := data.Document{ID: "d", Text: tc.text, Meta: tc.meta}
			got, st, err := SplitAll([]data.Document{doc}, tc.cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			// Round-trip through JSON so the comparison sees what the
			// golden file can express.
			gb, _ := json.Marshal(golden{Oversize: st.Oversize, Chunks: got})
			var gotG golden
			if err := json.Unmarshal(gb, &gotG); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(gotG, want) {
				t.Errorf("trace: %s\n got %s\nwant %s", tc.trace, gb, b)
			}
			for _, c := range got {
				if Collapse(tc.text[c.Start:c.End]) != c.Text {
					t.Errorf("chunk %s: Collapse(text[%d:%d]) = %q, Text %q", c.ID, c.Start, c.End, Collapse(tc.text[c.Start:c.End]), c.Text)
				}
			}
		})
	}
}

// refSplit is a line-by-line port of LangChain's RecursiveCharacterTextSplitter
// on strings, without offsets, used to check SplitText on random inputs.
func refSplit(text string, seps []string, size, overlap int, length func(string) int) []string {
	var final []string
	sep := seps[len(seps)-1]
	var next []string
	for i, s := range seps {
		if s == "" {
			sep = s
			break
		}
		if strings.Contains(text, s) {
			sep, next = s, seps[i+1:]
			break
		}
	}
	var splits []string
	if sep == "" {
		for _, r := range text {
			splits = append(splits, string(r))
		}
	} else {
		parts := strings.Split(text, sep)
		cand := []string{parts[0]}
		for _, p := range parts[1:] {
			cand = append(cand, sep+p)
		}
		for _, c := range cand {
			if c != "" {
				splits = append(splits, c)
			}
		}
	}
	merge := func(splits []string) []string {
		sepLen := length("")
		var docs, cur []string
		total := 0
		add := func(cond bool) int {
			if cond {
				return sepLen
			}
			return 0
		}
		for _, d := range splits {
			l := length(d)
			if total+l+add(len(cur) > 0) > size {
				if len(cur) > 0 {
					if doc := strings.TrimFunc(strings.Join(cur, ""), isSpace); doc != "" {
						docs = append(docs, doc)
					}
					for total > overlap || (total+l+add(len(cur) > 0) > size && total > 0) {
						total -= length(cur[0]) + add(len(cur) > 1)
						cur = cur[1:]
					}
				}
			}
			cur = append(cur, d)
			total += l + add(len(cur) > 1)
		}
		if doc := strings.TrimFunc(strings.Join(cur, ""), isSpace); doc != "" {
			docs = append(docs, doc)
		}
		return docs
	}
	var good []string
	for _, s := range splits {
		if length(s) < size {
			good = append(good, s)
			continue
		}
		if len(good) > 0 {
			final = append(final, merge(good)...)
			good = nil
		}
		if len(next) == 0 {
			final = append(final, s)
		} else {
			final = append(final, refSplit(s, next, size, overlap, length)...)
		}
	}
	if len(good) > 0 {
		final = append(final, merge(good)...)
	}
	return final
}

// TestSplitTextMatchesReference compares SplitText with refSplit on random
// texts built from separators, accented letters and whitespace, and checks
// that every piece is the text at its span.
func TestSplitTextMatchesReference(t *testing.T) {
	alphabet := []string{"a", "b", "ç", "ã", "é", " ", " ", "\n", "\n\n", ".", "\t", "  ", "palavra", "\u00a0", "\x1f"}
	seps := [][]string{nil, {"\n\n", "\n", " ", ""}, {"."}, {"\n", "é", ""}}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		var b strings.Builder
		n := r.IntN(60)
		for j := 0; j < n; j++ {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		text := b.String()
		size := 1 + r.IntN(20)
		cfg := Config{Size: size, Overlap: r.IntN(size), Separators: seps[r.IntN(len(seps))]}
		if r.IntN(3) == 0 {
			cfg.Length = byteLen
		}
		got, err := SplitText(text, cfg)
		if err != nil {
			t.Fatal(err)
		}
		full := cfg.withDefaults()
		want := refSplit(text, full.Separators, cfg.Size, cfg.Overlap, full.Length)
		var gotText []string
		for _, p := range got {
			gotText = append(gotText, p.Text)
			if text[p.Start:p.End] != p.Text {
				t.Fatalf("text %q cfg %+v: piece %q at [%d,%d) is %q", text, cfg, p.Text, p.Start, p.End, text[p.Start:p.End])
			}
		}
		if !reflect.DeepEqual(gotText, want) {
			t.Fatalf("text %q size %d overlap %d seps %q:\n got %q\nwant %q", text, cfg.Size, cfg.Overlap, full.Separators, gotText, want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		cfg     Config
		wantErr string // substring; "" = valid
	}{
		{DefaultConfig(), ""},
		{Config{Size: 1, Overlap: 0}, ""},
		{Config{Size: 0}, `"Size": must be > 0`},
		{Config{Size: -3}, `"Size": must be > 0`},
		{Config{Size: 10, Overlap: 10}, `"Overlap": must be < Size (10), got 10`},
		{Config{Size: 10, Overlap: 11}, `"Overlap": must be < Size`},
		{Config{Size: 10, Overlap: -1}, `"Overlap": must be >= 0`},
	}
	for _, tc := range cases {
		err := tc.cfg.Validate()
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("%+v: unexpected error %v", tc.cfg, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%+v: error %v, want it to contain %q", tc.cfg, err, tc.wantErr)
		}
		if _, err := Split(data.Document{ID: "d", Text: "x"}, tc.cfg); err == nil {
			t.Errorf("%+v: Split accepted an invalid config", tc.cfg)
		}
	}
	d := DefaultConfig()
	if d.Size != 512 || d.Overlap != 128 || !reflect.DeepEqual(d.Separators, []string{"\n\n", "\n", " ", "."}) || d.Length("ção") != 3 {
		t.Errorf("DefaultConfig() = %+v, want the AP paper's 512/128 with [\\n\\n \\n space .] and rune length", d)
	}
}

func TestCollapse(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", ""},
		{" \t\n ", ""},
		{"a  b", "a b"},
		{"\n a\tb\r\nc ", "a b c"},
		{"não\u00a0é", "não é"},  // NBSP is whitespace in Python
		{"x\x1fy", "x y"},        // unit separator too (str.isspace)
		{"x\u200by", "x\u200by"}, // zero-width space is not
	}
	for _, tc := range cases {
		if got := Collapse(tc.in); got != tc.want {
			t.Errorf("Collapse(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSplitAll(t *testing.T) {
	cfg := Config{Size: 10, Overlap: 4}
	docs := []data.Document{
		{ID: "a", Text: "aaa bbb ccc", Meta: map[string]any{"k": int64(1)}},
		{ID: "b", Text: "  "},
		{ID: "c", Text: "abcdefghijklmnop"},
	}
	var calls [][2]int
	got, st, err := SplitAll(docs, cfg, func(done, total int) { calls = append(calls, [2]int{done, total}) })
	if err != nil {
		t.Fatal(err)
	}
	wantIDs := []string{"a#0", "a#1", "c#0"}
	var ids []string
	for _, c := range got {
		ids = append(ids, c.ID)
	}
	if !reflect.DeepEqual(ids, wantIDs) {
		t.Errorf("ids %v, want %v", ids, wantIDs)
	}
	if want := (Stats{Docs: 3, Chunks: 3, Oversize: 1, Empty: 1}); st != want {
		t.Errorf("stats %+v, want %+v", st, want)
	}
	if want := [][2]int{{1, 3}, {2, 3}, {3, 3}}; !reflect.DeepEqual(calls, want) {
		t.Errorf("progress calls %v, want %v", calls, want)
	}
	got[0].Meta["k"] = int64(2)
	if docs[0].Meta["k"] != int64(1) || got[1].Meta["k"] != int64(1) {
		t.Error("chunk Meta shares the document's map")
	}

	for _, bad := range [][]data.Document{
		{{ID: "x", Text: "a"}, {ID: "x", Text: "b"}},
		{{ID: "", Text: "a"}},
	} {
		if _, _, err := SplitAll(bad, cfg, nil); err == nil {
			t.Errorf("SplitAll(%v): no error for a duplicate or empty id", bad)
		}
	}
}

// shared returns <module root>/../shared/data/rel or skips.
func shared(tb testing.TB, rel string) string { return testutil.SharedPath(tb, "data/"+rel) }

// TestSplitAPCorpus is the acceptance check: the AP corpus (221 pages), split
// per page with 512/128, gives 956 chunks as in the paper's setup.
func TestSplitAPCorpus(t *testing.T) {
	docs, err := data.LoadHFDataset(shared(t, "ap_protocols"), data.HFOptions{})
	if err != nil {
		t.Fatal(err)
	}
	chunks, st, err := SplitAll(docs, DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 221 || len(chunks) != 956 {
		t.Fatalf("%d docs -> %d chunks, want 221 -> 956", len(docs), len(chunks))
	}
	if st.Oversize != 0 || st.Empty != 0 {
		t.Errorf("stats %+v: want no oversize chunk and no empty page", st)
	}
	text := map[string]string{}
	for _, d := range docs {
		text[d.ID] = d.Text
	}
	for _, c := range chunks {
		if got := Collapse(text[c.DocID][c.Start:c.End]); got != c.Text {
			t.Fatalf("chunk %s: span [%d,%d) collapses to %q, chunk text %q", c.ID, c.Start, c.End, got, c.Text)
		}
		if n := RuneLen(c.Text); n > 512 {
			t.Fatalf("chunk %s has %d characters", c.ID, n)
		}
	}
}

func BenchmarkSplitAP(b *testing.B) {
	docs, err := data.LoadHFDataset(shared(b, "ap_protocols"), data.HFOptions{})
	if err != nil {
		b.Fatal(err)
	}
	cfg := DefaultConfig()
	n := 0
	for _, d := range docs {
		n += len(d.Text)
	}
	b.SetBytes(int64(n))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := SplitAll(docs, cfg, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func TestTextKey(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"Fixação em formol", "fixac\u0327a\u0303o  EM\tformol\n", true}, // NFD, case, whitespace
		{"  HER2+ positivo ", "her2+ positivo", true},
		{"Straße", "STRASSE", true},   // full case folding
		{"fixação", "fixacao", false}, // accents are not stripped
		{"HER2+", "HER2-", false},
		{"a b", "ab", false},
	} {
		if got := TextKey(c.a) == TextKey(c.b); got != c.same {
			t.Errorf("TextKey(%q) = %q, TextKey(%q) = %q: equal %v, want %v", c.a, TextKey(c.a), c.b, TextKey(c.b), got, c.same)
		}
	}
}
