package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/infer/pipeline"
	"github.com/ragforge/ragforge/train/selflearn"
)

// runOutErr executes the CLI and returns stdout and stderr; it fails the
// test on a non-zero exit.
func runOutErr(t *testing.T, args ...string) (string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if code := execute(args, &out, &errb); code != 0 {
		t.Fatalf("ragforge %s: exit %d\nstderr: %s", strings.Join(args, " "), code, errb.String())
	}
	return out.String(), errb.String()
}

// Issue 36, acceptance 1: a retriever exported with non-default
// max_seq_length, prompts, pooling and normalization is encoded by `encode`
// and `infer embed` with no flags byte-identically to the same commands
// given those values as flags; ragforge_encode.json records each value with
// its source, and a flag says on stderr that it overrides the model.
func TestEncodeTakesTheModelDirectorysSettings(t *testing.T) {
	vocab := sharedDir(t, "fixtures/bert-tiny/vocab.txt")
	dir, corpus, qa := sampleFiles(t)
	db := filepath.Join(dir, "runs.db")
	bert := filepath.Join(dir, "bert")
	run(t, "models", "init", "--db", db, "--arch", "bert", "--size", "tiny", "--tokenizer", vocab, "--out", bert, "--pooling", "cls")
	st := filepath.Join(dir, "st")
	run(t, "export", "--db", db, "--retriever", bert, "--out", st, "--max-length", "16", "--pooling", "mean", "--normalize=false",
		"--query-prefix", "query: ", "--passage-prefix", "passage: ")
	flags := []string{"--max-length", "16", "--pooling", "mean", "--normalize=false", "--query-prefix", "query: ", "--passage-prefix", "passage: "}

	encodeInto := func(name string, args ...string) (data.EncodeInfo, []byte, string) {
		out := filepath.Join(dir, name)
		_, stderr := runOutErr(t, append([]string{"encode", "--db", db, "--corpus", corpus, "--encoder", st, "--out", out, "--name", "c"}, args...)...)
		b, err := os.ReadFile(filepath.Join(out, "embeddings", "c", "c_Embeds_0.npy"))
		if err != nil {
			t.Fatal(err)
		}
		var info data.EncodeInfo
		ib, err := os.ReadFile(filepath.Join(out, "embeddings", "c", data.EncodeInfoFile))
		if err != nil || json.Unmarshal(ib, &info) != nil {
			t.Fatalf("%s: %v\n%s", data.EncodeInfoFile, err, ib)
		}
		return info, b, stderr
	}
	modelInfo, fromModel, quiet := encodeInto("model")
	flagInfo, fromFlags, loud := encodeInto("flags", flags...)
	otherInfo, fromDefaults, _ := encodeInto("defaults", "--max-length", "512", "--pooling", "cls", "--normalize", "--passage-prefix", "")
	if !bytes.Equal(fromModel, fromFlags) {
		t.Error("encode with no flags and encode with the model's settings as flags wrote different .npy files")
	}
	if bytes.Equal(fromModel, fromDefaults) {
		t.Error("ragforge's defaults gave the model's vectors: the comparison cannot tell whether the settings were read")
	}
	want := data.EncodeInfo{Pooling: "mean", Normalize: false, MaxLength: 16, QueryPrefix: "query: ", PassagePrefix: "passage: "}
	for _, c := range []struct {
		name   string
		got    data.EncodeInfo
		source string
	}{{"no flags", modelInfo, "model"}, {"flags", flagInfo, "flag"}} {
		g := c.got
		if g.Pooling != want.Pooling || g.Normalize != want.Normalize || g.MaxLength != want.MaxLength || g.QueryPrefix != want.QueryPrefix || g.PassagePrefix != want.PassagePrefix {
			t.Errorf("%s: %s records %+v, want the export's settings", c.name, data.EncodeInfoFile, g)
		}
		s := c.source
		if g.Sources != (data.EncodeSources{Pooling: s, Normalize: s, MaxLength: s, QueryPrefix: s, PassagePrefix: s}) {
			t.Errorf("%s: sources %+v, want all %q", c.name, g.Sources, s)
		}
	}
	if otherInfo.MaxLength != 512 || otherInfo.Sources.QueryPrefix != "model" || otherInfo.Sources.MaxLength != "flag" {
		t.Errorf("some flags: %+v", otherInfo)
	}
	// The run config records the settings and their sources too (the last
	// encode run: the "defaults" one).
	var cfg struct {
		Enc encoderOptions
	}
	if r := runOf(t, db, "encode"); r == nil || json.Unmarshal(r.Config, &cfg) != nil || cfg.Enc.MaxLength != 512 || cfg.Enc.Sources.MaxLength != "flag" || cfg.Enc.QueryPrefix != "query: " || cfg.Enc.Sources.QueryPrefix != "model" {
		t.Errorf("encode run config: %+v", cfg.Enc)
	}
	if strings.Contains(quiet, "overrides") {
		t.Errorf("no flags, stderr says: %s", quiet)
	}
	for _, f := range []string{"--max-length 16", "--pooling \"mean\"", "--normalize false", "--query-prefix \"query: \"", "--passage-prefix \"passage: \""} {
		if !strings.Contains(loud, f+" overrides the model's") {
			t.Errorf("stderr does not say %q overrides the model's value:\n%s", f, loud)
		}
	}

	// eval retrieval's dense retriever records the model's settings in its run config.
	run(t, "eval", "retrieval", "--db", db, "--corpus", corpus, "--qa", qa, "--retriever", "dense", "--encoder", st, "--k", "1")
	var ev struct {
		Retriever struct {
			Enc encoderOptions `json:"encoder_options"`
		} `json:"retriever"`
	}
	if r := runOf(t, db, "eval-retrieval"); r == nil || json.Unmarshal(r.Config, &ev) != nil || ev.Retriever.Enc.MaxLength != 16 || ev.Retriever.Enc.Sources.PassagePrefix != "model" {
		t.Errorf("eval retrieval run config: %+v", ev.Retriever.Enc)
	}
	for _, typ := range []string{"query", "document"} {
		base := []string{"infer", "embed", "--model", st, "--input", "HER2 scoring of breast carcinoma after formalin fixation", "--input-type", typ, "--json"}
		plain := run(t, base...)
		flagged := run(t, append(base, flags...)...)
		if plain != flagged {
			t.Errorf("infer embed --input-type %s: no flags and the model's settings as flags differ:\n%s\n%s", typ, plain, flagged)
		}
		if other := run(t, append(base, "--max-length", "512", "--pooling", "cls")...); other == plain {
			t.Errorf("infer embed --input-type %s: other settings gave the same vector", typ)
		}
	}

	// pipeline build records the retriever's own settings, with their source.
	pipe := filepath.Join(dir, "pipe")
	run(t, "pipeline", "build", "--db", db, "--corpus", corpus, "--retriever", st, "--out", pipe)
	m, err := pipeline.ReadManifest(filepath.Join(pipe, pipeline.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	r := m.Retrieval
	if r.MaxLength != 16 || r.Pooling != "mean" || r.Normalize || r.QueryInstruction != "query: " || r.DocInstruction != "passage: " || r.Sources.MaxLength != "model" || r.Sources.QueryPrefix != "model" {
		t.Errorf("pipeline.json retrieval %+v, want the export's settings from the model", r)
	}
}

// selflearn's rounds start from the start retriever's token limit,
// prompts and normalization; --max-length overrides the limit and says so.
func TestSelflearnStartsFromTheRetrieversSettings(t *testing.T) {
	vocab := sharedDir(t, "fixtures/bert-tiny/vocab.txt")
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	bert := filepath.Join(dir, "bert")
	run(t, "models", "init", "--db", db, "--arch", "bert", "--size", "tiny", "--tokenizer", vocab, "--out", bert)
	st := filepath.Join(dir, "st")
	run(t, "export", "--db", db, "--retriever", bert, "--out", st, "--max-length", "64", "--query-prefix", "query: ",
		"--passage-prefix", "passage: ", "--normalize=false")
	for _, c := range []struct {
		args   []string
		maxLen int
		note   string
	}{
		{nil, 64, ""},
		{[]string{"--max-length", "96"}, 96, "--max-length 96 overrides the model's 64"},
	} {
		var errb bytes.Buffer
		cfg := selflearn.DefaultConfig()
		cfg.RetrieverDir, cfg.Generator, cfg.WorkDir = st, "ict", filepath.Join(dir, "work")
		var set selflearn.Settings
		if c.args != nil {
			cfg.MaxLength = c.maxLen // as the flag set it
			set.Explicit = []string{"MaxLength"}
		}
		cfg, err := selflearn.Prepare(cfg, set, &errb)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.DocInstruction != "passage: " || !cfg.Unnormalized {
			t.Errorf("%v: document instruction %q, unnormalized %v; want the model's \"passage: \", true", c.args, cfg.DocInstruction, cfg.Unnormalized)
		}
		if cfg.MaxLength != c.maxLen || cfg.QueryInstruction != "query: " || !strings.Contains(errb.String(), c.note) || (c.note == "" && errb.Len() > 0) {
			t.Errorf("%v: max length %d, query instruction %q, stderr %q; want %d, \"query: \", %q", c.args, cfg.MaxLength, cfg.QueryInstruction, errb.String(), c.maxLen, c.note)
		}
	}
}
