package learn

import (
	"strings"
	"testing"

	"github.com/ragforge/ragforge/models/tokenizer/sentencepiece"
)

// normalizer returns a model whose only use is Normalize with charsmap cm.
func normalizer(t *testing.T, cm []byte) *sentencepiece.Model {
	t.Helper()
	ns := sentencepiece.DefaultNormalizerSpec()
	ns.PrecompiledCharsmap = cm
	m, err := sentencepiece.New(metaPieces(), t5TrainerSpec(numMeta), ns)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestBuildCharsmap(t *testing.T) {
	cm, err := BuildCharsmap(map[string]string{"a": "b", "ab": "X", "é": "e", "\n": " ", "\x01": "", "abc": "long"})
	if err != nil {
		t.Fatal(err)
	}
	m := normalizer(t, cm)
	for _, tc := range []struct{ in, want string }{
		{"xaby", "▁xXy"},    // longest key: ab, not a
		{"a", "▁b"},         // a alone
		{"abcd", "▁longd"},  // three-byte key
		{"xé", "▁xe"},       // two-byte UTF-8 key
		{"x\ny", "▁x▁y"},    // newline to space
		{"x\x01y", "▁xy"},   // deleted
		{"\x00b", "▁\x00b"}, // NUL matches no unit
		{"zzz", "▁zzz"},     // no rule
		{"ñ", "▁ñ"},         // shares its lead byte with é only
	} {
		if got, _ := m.Normalize(tc.in); got != tc.want {
			t.Errorf("Normalize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, bad := range []map[string]string{{"": "x"}, {"a\x00": "x"}, {"a": "x\x00"}} {
		if _, err := BuildCharsmap(bad); err == nil {
			t.Errorf("BuildCharsmap(%q): no error", bad)
		}
	}
}

// TestNMTNFKCCharsmap checks every rule of NMTNFKCRules through the compiled
// charsmap and sentencepiece's normalizer.
func TestNMTNFKCCharsmap(t *testing.T) {
	rules := NMTNFKCRules()
	for k, want := range map[string]string{"µ": "μ", "ﬁ": "fi", "①": "1", "\t": " ", "\u3000": " ", "\u2581": " ", "\x7f": "", "Ａ": "A"} {
		if rules[k] != want {
			t.Errorf("rule %q = %q, want %q", k, rules[k], want)
		}
	}
	m := normalizer(t, NMTNFKCCharsmap())
	n := 0
	for k, v := range rules {
		if strings.Contains(v, " ") || v == "" {
			continue // whitespace rules are folded by remove_extra_whitespaces
		}
		if got, _ := m.Normalize("x" + k + "y"); got != "▁x"+v+"y" {
			t.Errorf("Normalize(x%qy) = %q, want %q", k, got, "▁x"+v+"y")
		}
		n++
	}
	if n < 4000 {
		t.Errorf("only %d non-space rules checked", n)
	}
	if got, _ := m.Normalize("a\tb\n\nc\x01d"); got != "▁a▁b▁cd" {
		t.Errorf("whitespace/control: %q, want %q", got, "▁a▁b▁cd")
	}
}
