package filter

import (
	"encoding/json"
	"fmt"

	"github.com/ragforge/ragforge/models/t5"
)

// WindowsKey is the config.json key of the windows a filter was evaluated
// (and so is to be served) at (Windowing, as JSON), written by `export`
// and `train calibration`; transformers keeps it as a config attribute.
const WindowsKey = "ragforge_filter_windows"

// Windowing is the one type of a filter's window settings, embedded by
// Config (the Predictor), train/filtertrain's Config and EvalOptions and
// infer/pipeline's manifest: each instruction is cut into overflow windows
// of MaxSeqLength tokens (</s> included) sharing DocStride (HF truncation
// with return_overflowing_tokens and stride, see Windows), and the windows'
// P([HELPFUL]) are combined by Aggregate. RAG²'s
// classifier/run_classifier.py uses 512 and 128 and scores the maximum.
type Windowing struct {
	MaxSeqLength int    `json:"max_seq_length"`
	DocStride    int    `json:"doc_stride"`
	Aggregate    string `json:"aggregate,omitempty"` // CheckAggregate's rules; "" is max
}

// DefaultWindows are RAG²'s: 512 tokens sharing 128, the maximum.
func DefaultWindows() Windowing { return Windowing{MaxSeqLength: 512, DocStride: 128} }

// Check returns an error naming the first field that makes no sense; the
// one validation of window settings.
func (w Windowing) Check() error {
	if w.MaxSeqLength < 2 {
		return fmt.Errorf("windows: max_seq_length %d, want ≥ 2 (content and </s>)", w.MaxSeqLength)
	}
	if w.DocStride < 0 || w.DocStride >= w.MaxSeqLength-1 {
		return fmt.Errorf("windows: doc_stride %d, want in [0, max_seq_length-1 = %d)", w.DocStride, w.MaxSeqLength-1)
	}
	if err := CheckAggregate(w.Aggregate); err != nil {
		return fmt.Errorf("windows: %w", err)
	}
	return nil
}

// WindowsOf returns the windows recorded under WindowsKey in a checkpoint's
// config.json (raw is that key's JSON, ok whether it was there); nil when
// it was not. Errors: a value that does not decode or fails Check, naming
// the key.
func WindowsOf(raw json.RawMessage, ok bool) (*Windowing, error) {
	return configValue[Windowing](raw, ok, WindowsKey)
}

// Settings are what a filter directory's config.json carries besides the
// T5: the windows it was evaluated at, its match marks and its
// calibration; each nil when absent.
type Settings struct {
	Windows     *Windowing
	Marks       *MatchMarks
	Calibration *Calibration
}

// DirSettings reads the settings of the filter directory dir from its
// config.json: the one reader eval filter, train calibration, pipeline
// build and serve take a filter's defaults from. Errors name dir and the
// key.
func DirSettings(dir string) (Settings, error) {
	c, err := t5.LoadConfig(dir)
	if err != nil {
		return Settings{}, fmt.Errorf("filter %s: %w", dir, err)
	}
	return ConfigSettings(c)
}

// ConfigSettings reads Settings from a loaded config.json. Errors name the
// key.
func ConfigSettings(c t5.Config) (s Settings, err error) {
	if s.Windows, err = WindowsOf(c.Extra(WindowsKey)); err != nil {
		return s, err
	}
	if s.Marks, err = MatchMarksOf(c.Extra(MatchMarksKey)); err != nil {
		return s, err
	}
	if s.Calibration, err = CalibrationOf(c.Extra(CalibrationKey)); err != nil {
		return s, err
	}
	return s, nil
}
