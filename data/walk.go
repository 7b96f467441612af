package data

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrStop, returned by a Walk callback, ends the walk early; Walk then
// returns nil.
var ErrStop = errors.New("stop walking")

// Walk reads the corpus at path as Open does (a BEIR directory with
// corpus.jsonl, a save_to_disk dataset, a .jsonl or .csv file), but passes
// each document to fn as it is read instead of holding them all: memory is
// one record (one Arrow file for a save_to_disk dataset) plus the set of ids
// seen, kept to refuse duplicates. Documents come in file order, with the
// same fields, checks and errors as Open; a corpus without documents is an
// error. A pre-encoded corpus ("rag2:DIR") is refused: its chunks are
// already encoded (OpenEncoded). fn's error stops the walk and is returned
// as is, ErrStop excepted.
func Walk(path string, fields FieldOptions, fn func(Document) error) error {
	if IsEncodedSpec(path) {
		return fmt.Errorf("walk corpus %s: a pre-encoded corpus is read with OpenEncoded", path)
	}
	n := 0
	c := newCollector(fields)
	c.emit = func(d Document) error { n++; return fn(d) }
	var err error
	if st, serr := os.Stat(path); serr == nil && st.IsDir() && exists(filepath.Join(path, "corpus.jsonl")) {
		err = c.jsonl(filepath.Join(path, "corpus.jsonl")) // Open's order: BEIR first
	} else {
		err = c.corpus(path)
	}
	switch {
	case errors.Is(err, ErrStop):
		return nil
	case err != nil:
		return err
	case n == 0:
		return fmt.Errorf("corpus %s: no documents", path)
	}
	return nil
}
