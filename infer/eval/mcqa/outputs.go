package mcqa

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// OutputsCondition names the condition of a JSONL of outputs without one.
const OutputsCondition = "outputs"

// Outputs are stored raw outputs to re-score: condition → question key
// ("<dataset>/<id>") → raw output.
type Outputs map[string]map[string]string

// MIRAGESplit is the split in MIRAGE's prediction file names:
// "<split>_<id>.json", "dev" for MedMCQA, "test" otherwise
// (src/evaluate.py).
func MIRAGESplit(dataset string) string {
	if dataset == "medmcqa" {
		return "dev"
	}
	return "test"
}

// ReadOutputs reads outputs for the questions of datasets from path: a
// JSONL file of {id, raw[, dataset][, condition]} (dataset may be left out
// when the id names one question; condition defaults to OutputsCondition),
// or a directory in MIRAGE's prediction layout
// <dataset>/<cot|rag_K>/<llm>/…/<split>_<id>.json, each file a JSON list of
// raw outputs of which MIRAGE scores the first. In a tree, each directory
// holding prediction files is a condition named by its path below the
// dataset ("cot/OpenAI/gpt-35-turbo-16k"); every question must have its
// file there (MIRAGE stops on a missing one), and files of other questions
// are ignored.
func ReadOutputs(path string, datasets []Dataset) (Outputs, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return readTree(path, datasets)
	}
	return readJSONL(path, datasets)
}

func readJSONL(path string, datasets []Dataset) (Outputs, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	byID := map[string][]string{} // id → question keys
	known := map[string]bool{}
	for _, d := range datasets {
		for _, q := range d.Questions {
			byID[q.ID] = append(byID[q.ID], q.Key())
			known[q.Key()] = true
		}
	}
	out := Outputs{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var r struct {
			ID        string  `json:"id"`
			Dataset   string  `json:"dataset"`
			Condition string  `json:"condition"`
			Raw       *string `json:"raw"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s: line %d: %w", path, line, err)
		}
		if r.Raw == nil {
			return nil, fmt.Errorf("%s: line %d, id %q: field %q: missing", path, line, r.ID, "raw")
		}
		key := r.Dataset + "/" + r.ID
		if r.Dataset == "" {
			switch ks := byID[r.ID]; len(ks) {
			case 0:
				continue // a question outside the selection
			case 1:
				key = ks[0]
			default:
				return nil, fmt.Errorf("%s: line %d, id %q: field %q: missing, and the id is in several datasets", path, line, r.ID, "dataset")
			}
		} else if !known[key] {
			continue
		}
		if r.Condition == "" {
			r.Condition = OutputsCondition
		}
		if out[r.Condition] == nil {
			out[r.Condition] = map[string]string{}
		}
		if _, dup := out[r.Condition][key]; dup {
			return nil, fmt.Errorf("%s: line %d, id %q: field %q: a second output for %s under condition %q", path, line, r.ID, "id", key, r.Condition)
		}
		out[r.Condition][key] = *r.Raw
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

func readTree(root string, datasets []Dataset) (Outputs, error) {
	out := Outputs{}
	for _, d := range datasets {
		dir := filepath.Join(root, d.Name)
		leaves := map[string]bool{}
		prefix := MIRAGESplit(d.Name) + "_"
		err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !e.IsDir() && strings.HasPrefix(e.Name(), prefix) && strings.HasSuffix(e.Name(), ".json") {
				leaves[filepath.Dir(p)] = true
			}
			return nil
		})
		if errors.Is(err, fs.ErrNotExist) {
			continue // MIRAGE: "NOT STARTED."
		}
		if err != nil {
			return nil, err
		}
		names := make([]string, 0, len(leaves))
		for l := range leaves {
			names = append(names, l)
		}
		sort.Strings(names)
		for _, leaf := range names {
			rel, _ := filepath.Rel(dir, leaf)
			cond := filepath.ToSlash(rel)
			if out[cond] == nil {
				out[cond] = map[string]string{}
			}
			for _, q := range d.Questions {
				file := filepath.Join(leaf, prefix+q.ID+".json")
				b, err := os.ReadFile(file)
				if err != nil {
					return nil, fmt.Errorf("condition %q, dataset %q, id %q: %w", cond, d.Name, q.ID, err)
				}
				var list []string
				if err := json.Unmarshal(b, &list); err != nil || len(list) == 0 {
					return nil, fmt.Errorf("%s: want a non-empty JSON list of raw outputs (%v)", file, err)
				}
				out[cond][q.Key()] = list[0]
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no prediction files <dataset>/…/<split>_<id>.json for the selected datasets", root)
	}
	return out, nil
}

// Conditions returns the outputs' conditions, sorted.
func (o Outputs) Conditions() []string {
	out := make([]string, 0, len(o))
	for c := range o {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// Rescore scores stored outputs without calling a model: every output
// becomes an Item (no prompt), stored in rec, and the report covers the
// outputs' conditions, sorted; questions without an output are missing.
func Rescore(cfg Config, datasets []Dataset, outs Outputs, rec Recorder) (*Report, error) {
	cfg.Conditions = outs.Conditions()
	if cfg.Parse == "" {
		cfg.Parse = ParseStrict
	}
	if err := ValidParse(cfg.Parse); err != nil {
		return nil, err
	}
	items := map[string]map[string]Item{}
	for _, cond := range cfg.Conditions {
		items[cond] = map[string]Item{}
		for _, d := range datasets {
			for _, q := range d.Questions {
				raw, ok := outs[cond][q.Key()]
				if !ok {
					continue
				}
				it := Item{Condition: cond, Dataset: q.Dataset, ID: q.ID, Raw: raw}
				it.Score(q)
				if err := rec.PutItem(ItemKind, ItemKey(cond, q), it); err != nil {
					return nil, fmt.Errorf("mcqa: store item %s: %w", ItemKey(cond, q), err)
				}
				items[cond][q.Key()] = it
			}
		}
	}
	rep := BuildReport(cfg, datasets, items)
	if err := rec.LogMetrics(rep.Metrics(), 0); err != nil {
		return rep, fmt.Errorf("mcqa: log metrics: %w", err)
	}
	return rep, nil
}
