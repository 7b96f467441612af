package lm

import (
	"testing"
)

func TestCutStop(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		stop       []string
		want       string
		cut        bool
	}{
		{"none", "a b c", nil, "a b c", false},
		{"absent", "a b c", []string{"x"}, "a b c", false},
		{"first occurrence", "a. b. c.", []string{"."}, "a", true},
		{"earliest of several", "one\ntwo###", []string{"###", "\n"}, "one", true},
		{"at start", "STOP here", []string{"STOP"}, "", true},
		{"empty stop ignored", "abc", []string{""}, "abc", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, cut := CutStop(tc.text, tc.stop)
			if got != tc.want || cut != tc.cut {
				t.Errorf("CutStop(%q, %q) = %q, %v; want %q, %v", tc.text, tc.stop, got, cut, tc.want, tc.cut)
			}
		})
	}
}

func TestItemSeedPerPrompt(t *testing.T) {
	if ItemSeed(1, "a") == ItemSeed(1, "b") || ItemSeed(1, "a") == ItemSeed(2, "a") || ItemSeed(1, "a") != ItemSeed(1, "a") {
		t.Error("ItemSeed must depend on both the seed and the prompt, and only on them")
	}
}
