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
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	if st.IsDir() {
		for _, f := range []string{"state.json", "dataset_dict.json"} {
			if exists(filepath.Join(path, f)) {
				return LoadHFDataset(path, HFOptions{FieldOptions: opt})
			}
		}
		if c := filepath.Join(path, "corpus.jsonl"); exists(c) {
			return LoadJSONL(c, opt)
		}
		return nil, fmt.Errorf("load %s: directory has no state.json, dataset_dict.json or corpus.jsonl", path)
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl":
		return LoadJSONL(path, opt)
	case ".csv":
		return LoadCSV(path, opt)
	}
	return nil, fmt.Errorf("load %s: unknown corpus format (want a save_to_disk or BEIR directory, .jsonl or .csv)", path)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
