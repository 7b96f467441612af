package retriever

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/models/safetensors"
	"github.com/ragforge/ragforge/models/tokenizer"
	"github.com/ragforge/ragforge/retrieval/encode"
)

func readJSONFile(t *testing.T, path string) any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// An exported retriever is a sentence-transformers directory: each file
// holds the fields sentence-transformers reads, with ragforge's encoding
// settings, and the directory, encoded as those files say, reproduces the
// fixture's reference vectors.
func TestExportSentenceTransformers(t *testing.T) {
	src := testutil.SharedPath(t, "fixtures/bert-tiny")
	tests := []struct {
		name    string
		st      hf.SentenceTransformer
		modules []any
		pooling map[string]any
		prompts map[string]any
		vectors string // expected.safetensors tensor the exported model must give
	}{
		{
			name: "mean normalized with prompts",
			st:   hf.SentenceTransformer{Pooling: "mean", Normalize: true, MaxSeqLength: 512, QueryPrompt: "query: ", DocumentPrompt: "passage: "},
			modules: []any{
				map[string]any{"idx": 0.0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
				map[string]any{"idx": 1.0, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
				map[string]any{"idx": 2.0, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
			},
			pooling: map[string]any{"pooling_mode_cls_token": false, "pooling_mode_mean_tokens": true},
			prompts: map[string]any{"query": "query: ", "document": "passage: "},
			vectors: "outputs.mean_normalized",
		},
		{
			name: "cls without normalization",
			st:   hf.SentenceTransformer{Pooling: "cls", Normalize: false, MaxSeqLength: 64},
			modules: []any{
				map[string]any{"idx": 0.0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
				map[string]any{"idx": 1.0, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
			},
			pooling: map[string]any{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false},
			prompts: map[string]any{},
			vectors: "outputs.cls",
		},
	}
	fx, err := safetensors.ReadFile(filepath.Join(src, "expected.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "st")
			if err := Export(src, out, "", tt.st); err != nil {
				t.Fatal(err)
			}
			wantLen := float64(min(tt.st.MaxSeqLength, 128)) // bert-tiny: max_position_embeddings 128
			if got := readJSONFile(t, filepath.Join(out, "modules.json")); !reflect.DeepEqual(got, tt.modules) {
				t.Errorf("modules.json = %v\nwant %v", got, tt.modules)
			}
			pool := map[string]any{
				"word_embedding_dimension": 64.0, "pooling_mode_max_tokens": false, "pooling_mode_mean_sqrt_len_tokens": false,
				"pooling_mode_weightedmean_tokens": false, "pooling_mode_lasttoken": false, "include_prompt": true,
			}
			for k, v := range tt.pooling {
				pool[k] = v
			}
			if got := readJSONFile(t, filepath.Join(out, "1_Pooling", "config.json")); !reflect.DeepEqual(got, pool) {
				t.Errorf("1_Pooling/config.json = %v\nwant %v", got, pool)
			}
			st, err := os.Stat(filepath.Join(out, "2_Normalize"))
			if tt.st.Normalize != (err == nil && st.IsDir()) {
				t.Errorf("2_Normalize present = %v, want %v", err == nil, tt.st.Normalize)
			}
			if got, want := readJSONFile(t, filepath.Join(out, "sentence_bert_config.json")), map[string]any{"max_seq_length": wantLen, "do_lower_case": false}; !reflect.DeepEqual(got, want) {
				t.Errorf("sentence_bert_config.json = %v, want %v", got, want)
			}
			tc := readJSONFile(t, filepath.Join(out, "tokenizer_config.json")).(map[string]any)
			if tc["model_max_length"] != wantLen || tc["tokenizer_class"] != "BertTokenizer" || tc["do_lower_case"] != true {
				t.Errorf("tokenizer_config.json: model_max_length %v (want %v), other keys kept: %v %v", tc["model_max_length"], wantLen, tc["tokenizer_class"], tc["do_lower_case"])
			}
			want := map[string]any{"__version__": map[string]any{"sentence_transformers": hf.STVersion}, "prompts": tt.prompts,
				"default_prompt_name": nil, "similarity_fn_name": "cosine"}
			if got := readJSONFile(t, filepath.Join(out, "config_sentence_transformers.json")); !reflect.DeepEqual(got, want) {
				t.Errorf("config_sentence_transformers.json = %v\nwant %v", got, want)
			}
			for _, f := range []string{"config.json", "model.safetensors", "vocab.txt", "tokenizer.json"} {
				if _, err := os.Stat(filepath.Join(out, f)); err != nil {
					t.Errorf("missing %s", f)
				}
			}

			// Read back and encode the fixture texts as the files say.
			back, ok, err := hf.ReadSentenceTransformer(out)
			if err != nil || !ok {
				t.Fatalf("ReadSentenceTransformer: ok %v, %v", ok, err)
			}
			wantST := tt.st
			wantST.Dim, wantST.MaxSeqLength = 64, int(wantLen)
			if back != wantST {
				t.Errorf("read back %+v, want %+v", back, wantST)
			}
			be, err := backend.New(testBackend)
			if err != nil {
				t.Fatal(err)
			}
			m, err := bert.Load(be, out)
			if err != nil {
				t.Fatal(err)
			}
			tok, err := tokenizer.Load(out)
			if err != nil {
				t.Fatal(err)
			}
			// The fast tokenizer's file, written from vocab.txt, encodes alike.
			fast, err := tokenizer.LoadJSON(filepath.Join(out, tokenizer.JSONFile))
			if err != nil {
				t.Fatal(err)
			}
			for _, text := range []string{"Coloração Histoquímica – Azul de Toluidina", "pH 7,4 e 3,5 µm"} {
				if a, b := fast.Encode(text, true), tok.Encode(text, true); !reflect.DeepEqual(a, b) {
					t.Errorf("%q: tokenizer.json ids %v, vocab.txt ids %v", text, a, b)
				}
			}
			enc := encode.NewBERTEncoder(m, tok, "st")
			enc.Pooling, enc.Normalize, enc.MaxLength = bert.Pooling(back.Pooling), back.Normalize, back.MaxSeqLength
			texts := []string{
				"Diferenciar em álcool a 96% até os cortes ficarem azul muito claro. A heparina, altamente sulfatada, é revelada pelo azul de toluidina.",
				"Desparafinar e hidratar os cortes.",
			}
			vecs, err := enc.EncodeDocs(texts)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := fx.Tensors[tt.vectors].Float32()
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range vecs {
				for j, x := range v {
					if w := ref[i*64+j]; math.Abs(float64(x-w)) > 1e-4+1e-4*math.Abs(float64(w)) {
						t.Fatalf("text %d dim %d: %v, fixture %s %v", i, j, x, tt.vectors, w)
					}
				}
			}
		})
	}
	if err := Export(src, filepath.Join(t.TempDir(), "x"), "", hf.SentenceTransformer{Pooling: "max", MaxSeqLength: 8}); err == nil || !strings.Contains(err.Error(), "Pooling") {
		t.Errorf("pooling max: err = %v", err)
	}
}
