package encode

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/ragforge/ragforge/data"
)

// WeightsSHA256 returns the hex sha256 of dir/model.safetensors, or "" when
// the directory has no such file (sharded or other weights).
func WeightsSHA256(dir string) (string, error) {
	f, err := os.Open(filepath.Join(dir, "model.safetensors"))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("hash weights: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash weights %s: %w", f.Name(), err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Info describes how e, loaded from dir, encodes: the fields of
// data.EncodeInfo that depend on the encoder (rows, dim, source and
// chunking are the caller's).
func (e *BERTEncoder) Info(dir string) (data.EncodeInfo, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return data.EncodeInfo{}, err
	}
	sum, err := WeightsSHA256(dir)
	if err != nil {
		return data.EncodeInfo{}, err
	}
	pool := e.Pooling
	if pool == "" {
		pool = "cls"
	}
	return data.EncodeInfo{
		Encoder: abs, WeightsSHA256: sum, Pooling: string(pool), Normalize: e.Normalize,
		MaxLength: e.MaxTokens(), QueryPrefix: e.QueryInstruction, PassagePrefix: e.DocInstruction,
	}, nil
}
