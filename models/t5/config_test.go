package t5

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/models/hf"
)

func TestConfigExtra(t *testing.T) {
	c, err := parseConfig([]byte(`{"model_type": "t5", "d_model": 64, "ragforge_init": {"token_match_heads": 4}}`))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := c.Extra("ragforge_init"); !ok || string(v) != `{"token_match_heads": 4}` {
		t.Fatalf("Extra(ragforge_init) = %s, %v", v, ok)
	}
	if _, ok := c.Extra("absent"); ok {
		t.Fatal("Extra of an absent key reports it present")
	}
	before := c
	if err := c.SetExtra("ragforge_init", map[string]int{"token_match_heads": 2}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetExtra("new_key", []int{1, 2}); err != nil {
		t.Fatal(err)
	}
	if v, _ := before.Extra("ragforge_init"); string(v) != `{"token_match_heads": 4}` {
		t.Errorf("SetExtra changed a copy made before it: %s", v)
	}
	out, err := c.MarshalConfig()
	if err != nil {
		t.Fatal(err)
	}
	back, err := parseConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"ragforge_init": `{"token_match_heads":2}`, "new_key": `[1,2]`} {
		v, ok := back.Extra(key)
		if !ok || !hf.SameJSON(v, json.RawMessage(want)) {
			t.Errorf("after Save and Load, %s = %s (%v), want %s", key, v, ok, want)
		}
	}
	if i, j := strings.Index(string(out), "ragforge_init"), strings.Index(string(out), "new_key"); i < 0 || j < i {
		t.Errorf("key order: ragforge_init kept in place, new_key last; got\n%s", out)
	}
	if err := c.SetExtra("d_model", 1); err == nil || !strings.Contains(err.Error(), "modelled") {
		t.Errorf("SetExtra of a modelled field: %v", err)
	}
}
