package retriever

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ragforge/ragforge/internal/atomicfile"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/models/tokenizer"
	"github.com/ragforge/ragforge/retrieval/encode"
	"github.com/ragforge/ragforge/train/trainer"
)

// SentenceTransformer is the sentence-transformers description of a
// retriever trained with cfg on m: its pooling and normalisation, the token
// limit it was trained at (MaxLength clamped to m.MaxLength()), the query
// instruction as the "query" prompt and the document instruction as the
// "document" prompt.
func SentenceTransformer(cfg Config, m *bert.Model) hf.SentenceTransformer {
	return hf.SentenceTransformer{
		Dim: m.Config.HiddenSize, Pooling: string(cfg.Pooling), Normalize: cfg.Normalize,
		MaxSeqLength: min(cfg.MaxLength, m.MaxLength()), QueryPrompt: cfg.QueryInstruction,
		DocumentPrompt: cfg.DocInstruction,
	}
}

// Export copies the BERT bi-encoder in srcDir (a checkpoint or a trained
// retriever: config.json, weights, tokenizer files) to outDir and makes it a
// sentence-transformers directory described by st (hf.WriteSentenceTransformer),
// loading the model on the GoMLX backend backendName (models/backend.New):
// st.Dim is taken from the model, st.MaxSeqLength is clamped to its
// max_position_embeddings, and tokenizer_config.json's model_max_length is
// set to it. A source without tokenizer.json gets one written from its
// tokenizer (tokenizer.WriteJSON). Optimizer and trainer state are left out. The model is loaded
// first (it must be a BERT checkpoint with a tokenizer); outDir is written
// through a temporary sibling and renamed, so it is complete or absent.
// Errors: outDir exists, srcDir does not load, an invalid st, I/O errors.
func Export(srcDir, outDir, backendName string, st hf.SentenceTransformer) error {
	src, err := filepath.EvalSymlinks(srcDir)
	if err != nil {
		return fmt.Errorf("export retriever %s: %w", srcDir, err)
	}
	if _, err := os.Lstat(outDir); err == nil {
		return fmt.Errorf("export retriever %s: %s already exists (not overwritten)", srcDir, outDir)
	}
	m, tok, err := encode.LoadModelWithTokenizer(src, backendName) // BERT or XLM-R by model_type
	if err != nil {
		return fmt.Errorf("export retriever: %w", err)
	}
	st.Dim = m.Config.HiddenSize
	st.MaxSeqLength = min(st.MaxSeqLength, m.MaxLength())
	if err := st.Validate(); err != nil {
		return fmt.Errorf("export retriever %s: %w", srcDir, err)
	}
	err = atomicfile.Dir(outDir, false, func(tmp string) error {
		ents, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if !e.Type().IsRegular() || e.Name() == trainer.OptimizerFile || e.Name() == trainer.StateFile {
				continue
			}
			if err := hf.CopyFile(filepath.Join(src, e.Name()), filepath.Join(tmp, e.Name())); err != nil {
				return err
			}
		}
		// A checkpoint with only vocab.txt gets the fast tokenizer's file too,
		// which transformers.js needs.
		if _, err := os.Stat(filepath.Join(tmp, tokenizer.JSONFile)); errors.Is(err, fs.ErrNotExist) {
			if err := tokenizer.WriteJSON(tmp, tok); err != nil {
				return err
			}
		}
		if err := hf.WriteSentenceTransformer(tmp, st); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("export retriever %s: %w", srcDir, err)
	}
	return nil
}
