package data

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ragforge/ragforge/data/npy"
)

// LoadRAG2Corpus reads one corpus of the RAG² / Self-BioRAG retriever layout
// (dmis-lab/RAG2 retriever/README.md):
//
//	<root>/embeddings/<corpus>/*.npy   float32 [N_k, D] MedCPT article embeddings (D = 768)
//	<root>/articles/<corpus>/*.json    a JSON list of N_k records per file
//
// The k-th .npy file in name order (numeric runs compared as numbers, so
// PubMed_Embeds_2 < PubMed_Embeds_10, matching RAG²'s range(38) loop) pairs
// with the JSON file of the same name with "Embeds" replaced by "Articles"
// (PubMed_Embeds_3.npy ↔ PubMed_Articles_3.json), or else of the same stem
// (x.npy ↔ x.json). Row i of the .npy file is the embedding of record i of
// its JSON file. Note that RAG² adds PMC as Main then Abs; name order puts
// Abs first, so global row numbers differ from RAG²'s for pmc (the pairing
// does not).
//
// A record is either a string (RAG² passes records as evidence text) or an
// object: "id"/"pmid"/"PMID"/"_id" → Document.ID; "title"/"t" → Title;
// "text"/"content"/"contents"/"a"/"abstract" (the first present) → Text;
// every other field → Meta. Records without an id get
// "<corpus>/<json file>:<row>". Meta also records "corpus", "file" (the JSON
// file name) and "row".
//
// It returns the documents in row order, the embeddings row-major
// [len(docs), dim] and dim. Errors name the file (and record): no .npy
// files, a missing JSON partner, a row/record count mismatch, differing
// dimensions, an invalid record, a duplicate id.
func LoadRAG2Corpus(root, corpus string) (docs []Document, vecs []float32, dim int, err error) {
	parts, dim, err := RAG2Shards(root, corpus)
	if err != nil {
		return nil, nil, 0, err
	}
	total := 0
	for _, p := range parts {
		total += p.Rows
	}
	vecs = make([]float32, 0, total*dim)
	docs = make([]Document, 0, total)
	seen := make(map[string]string, total)
	for _, p := range parts {
		sd, x, err := p.Read()
		if err != nil {
			return nil, nil, 0, err
		}
		for row, doc := range sd {
			where := fmt.Sprintf("%s record %d", p.Articles, row)
			if prev, dup := seen[doc.ID]; dup {
				return nil, nil, 0, fmt.Errorf("load rag2 corpus %q: %s: duplicate id %q (also %s)", corpus, where, doc.ID, prev)
			}
			seen[doc.ID] = where
		}
		docs = append(docs, sd...)
		vecs = append(vecs, x...)
	}
	return docs, vecs, dim, nil
}

// RAG2Shard is one .npy/.json pair of a RAG² corpus (LoadRAG2Corpus).
type RAG2Shard struct {
	Corpus    string
	Embeds    string // the .npy file
	Articles  string // its JSON partner
	Rows, Dim int    // the .npy shape
}

// RAG2Shards lists the .npy/.json pairs of corpus under root in
// LoadRAG2Corpus's order, reading only the .npy headers, so a corpus larger
// than memory is read one shard at a time (RAG2Shard.Read). It returns the
// dimension shared by all. Errors: LoadRAG2Corpus's for the listing (no .npy
// files, a missing JSON partner, differing dimensions).
func RAG2Shards(root, corpus string) ([]RAG2Shard, int, error) {
	embDir := filepath.Join(root, "embeddings", corpus)
	artDir := filepath.Join(root, "articles", corpus)
	entries, err := os.ReadDir(embDir)
	if err != nil {
		return nil, 0, fmt.Errorf("load rag2 corpus %q: %w", corpus, err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".npy") {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return nil, 0, fmt.Errorf("load rag2 corpus %q: no .npy files in %s", corpus, embDir)
	}
	slices.SortFunc(names, naturalCompare)
	parts := make([]RAG2Shard, len(names))
	dim := 0
	for i, name := range names {
		path := filepath.Join(embDir, name)
		n, d, err := npy.ReadShape(path)
		if err != nil {
			return nil, 0, fmt.Errorf("load rag2 corpus %q: %w", corpus, err)
		}
		if i == 0 {
			dim = d
		} else if d != dim {
			return nil, 0, fmt.Errorf("load rag2 corpus %q: %s: dimension %d, but %s has %d",
				corpus, path, d, filepath.Join(embDir, names[0]), dim)
		}
		js, err := articlesFile(artDir, name)
		if err != nil {
			return nil, 0, fmt.Errorf("load rag2 corpus %q: %s: %w", corpus, path, err)
		}
		parts[i] = RAG2Shard{Corpus: corpus, Embeds: path, Articles: js, Rows: n, Dim: d}
	}
	return parts, dim, nil
}

// Read loads the shard: its records as documents (LoadRAG2Corpus's
// conversion) and its embeddings, row-major [Rows, Dim]. Errors name the
// file and record: unreadable files, a NaN, infinite or all-zero row, a
// record count other than Rows, an invalid record. Ids are not checked
// against other shards (LoadRAG2Corpus does).
func (p RAG2Shard) Read() ([]Document, []float32, error) {
	x, _, _, err := npy.Read(p.Embeds)
	if err != nil {
		return nil, nil, fmt.Errorf("load rag2 corpus %q: %w", p.Corpus, err)
	}
	if err := checkEmbeddingRows(x, p.Dim); err != nil {
		return nil, nil, fmt.Errorf("load rag2 corpus %q: %s: %w", p.Corpus, p.Embeds, err)
	}
	recs, err := readRecords(p.Articles)
	if err != nil {
		return nil, nil, fmt.Errorf("load rag2 corpus %q: %w", p.Corpus, err)
	}
	if len(recs) != p.Rows {
		return nil, nil, fmt.Errorf("load rag2 corpus %q: %s has %d rows but %s has %d records",
			p.Corpus, p.Embeds, p.Rows, p.Articles, len(recs))
	}
	file := filepath.Base(p.Articles)
	docs := make([]Document, 0, len(recs))
	for row, raw := range recs {
		doc, err := recordDocument(raw, p.Corpus, file, row)
		if err != nil {
			return nil, nil, fmt.Errorf("load rag2 corpus %q: %s: record %d: %w", p.Corpus, p.Articles, row, err)
		}
		docs = append(docs, doc)
	}
	return docs, x, nil
}

// checkEmbeddingRows refuses an embedding matrix [len(x)/d, d] with a NaN
// or infinite value or an all-zero row: such a row scores NaN or 0 against
// every query, so retrieval metrics quietly drop to 0 (a failed encoding
// or a file written before its data).
func checkEmbeddingRows(x []float32, d int) error {
	for row := 0; row*d < len(x); row++ {
		v := x[row*d : (row+1)*d]
		zero := true
		for j, f := range v {
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				return fmt.Errorf("row %d column %d is %v: embeddings must be finite (re-encode the corpus)", row, j, f)
			}
			zero = zero && f == 0
		}
		if zero {
			return fmt.Errorf("row %d is all zeros: an embedding without a direction scores 0 for every query (re-encode the corpus)", row)
		}
	}
	return nil
}

// articlesFile returns the JSON file in artDir paired with the .npy file
// name.
func articlesFile(artDir, npyName string) (string, error) {
	stem := strings.TrimSuffix(npyName, ".npy")
	var tried []string
	for _, s := range []string{strings.Replace(stem, "Embeds", "Articles", 1), stem} {
		p := filepath.Join(artDir, s+".json")
		if slices.Contains(tried, p) {
			continue
		}
		tried = append(tried, p)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("no articles file (tried %s)", strings.Join(tried, ", "))
}

func readRecords(path string) ([]json.RawMessage, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read articles: %w", err)
	}
	var recs []json.RawMessage
	if err := json.Unmarshal(b, &recs); err != nil {
		return nil, fmt.Errorf("read articles %s: want a JSON list of records: %w", path, err)
	}
	return recs, nil
}

var (
	idKeys    = []string{"id", "pmid", "PMID", "_id"}
	titleKeys = []string{"title", "t"}
	textKeys  = []string{"text", "content", "contents", "a", "abstract"}
)

// recordDocument converts one articles record (a string or an object) into
// a Document.
func recordDocument(raw json.RawMessage, corpus, file string, row int) (Document, error) {
	doc := Document{
		ID:   corpus + "/" + file + ":" + strconv.Itoa(row),
		Meta: map[string]any{},
	}
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) > 0 && raw[0] == '"':
		if err := json.Unmarshal(raw, &doc.Text); err != nil {
			return doc, err
		}
	case len(raw) > 0 && raw[0] == '{':
		var obj map[string]any
		if err := json.Unmarshal(raw, &obj); err != nil {
			return doc, err
		}
		if k, v, ok := take(obj, idKeys); ok {
			s, err := scalarString(v)
			if err != nil {
				return doc, fmt.Errorf("field %q: %w", k, err)
			}
			doc.ID = s
		}
		if k, v, ok := take(obj, titleKeys); ok {
			s, isStr := v.(string)
			if !isStr && v != nil {
				return doc, fmt.Errorf("field %q: want a string, got %T", k, v)
			}
			doc.Title = s
		}
		if k, v, ok := take(obj, textKeys); ok {
			s, isStr := v.(string)
			if !isStr && v != nil {
				return doc, fmt.Errorf("field %q: want a string, got %T", k, v)
			}
			doc.Text = s
		}
		for k, v := range obj {
			doc.Meta[k] = v
		}
	default:
		return doc, fmt.Errorf("want a string or an object, got %.20s", raw)
	}
	doc.Meta["corpus"] = corpus
	doc.Meta["file"] = file
	doc.Meta["row"] = row
	return doc, nil
}

// take removes and returns the first of keys present in obj.
func take(obj map[string]any, keys []string) (string, any, bool) {
	for _, k := range keys {
		if v, ok := obj[k]; ok {
			delete(obj, k)
			return k, v, true
		}
	}
	return "", nil, false
}

func scalarString(v any) (string, error) {
	switch v := v.(type) {
	case string:
		if v == "" {
			return "", errors.New("empty id")
		}
		return v, nil
	case float64: // a numeric id such as a PMID (exact below 2^53)
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	default:
		return "", fmt.Errorf("want a string or number id, got %T", v)
	}
}

// naturalCompare orders names with digit runs compared as numbers
// ("a2" < "a10"), then bytewise.
func naturalCompare(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if isDigit(a[i]) && isDigit(b[j]) {
			si, sj := i, j
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				j++
			}
			na := strings.TrimLeft(a[si:i], "0")
			nb := strings.TrimLeft(b[sj:j], "0")
			if len(na) != len(nb) {
				return len(na) - len(nb)
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			continue
		}
		if a[i] != b[j] {
			return int(a[i]) - int(b[j])
		}
		i++
		j++
	}
	if c := (len(a) - i) - (len(b) - j); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
