package data

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// LoadCorpus loads a corpus from path, choosing the reader by what path is:
//
//   - a directory with state.json or dataset_dict.json: LoadHFDataset
//     (default split);
//   - a directory with corpus.jsonl (BEIR layout): LoadJSONL of that file;
//   - a file ending in .jsonl: LoadJSONL;
//   - a file ending in .csv: LoadCSV.
//
// Anything else is an error naming path.
func LoadCorpus(path string, opt FieldOptions) ([]Document, error) {
	c := newCollector(opt)
	if err := c.corpus(path); err != nil {
		return nil, err
	}
	return c.docs, nil
}

// corpus passes the records of path (LoadCorpus's formats) to c.
func (c *collector) corpus(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("load %s: %w", path, err)
	}
	if st.IsDir() {
		for _, f := range []string{"state.json", "dataset_dict.json"} {
			if exists(filepath.Join(path, f)) {
				return c.hfDataset(path, "")
			}
		}
		if p := filepath.Join(path, "corpus.jsonl"); exists(p) {
			return c.jsonl(p)
		}
		return fmt.Errorf("load %s: directory has no state.json, dataset_dict.json or corpus.jsonl", path)
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl":
		return c.jsonl(path)
	case ".csv":
		return c.csv(path)
	}
	return fmt.Errorf("load %s: unknown corpus format (want a save_to_disk or BEIR directory, .jsonl or .csv)", path)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
