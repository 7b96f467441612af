package filtertrain

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/ragforge/ragforge/internal/progress"
)

// ShowProgress shows one progress report of RunTrain on bar (nil: no bar):
// "train" sets the step and describes epoch, loss, learning rate and
// throughput; "log" and "eval" print HF Trainer's log line (LogLine) on w
// above the bar, as `train filter` does on stderr.
func ShowProgress(bar *progress.Bar, w io.Writer, p Progress) {
	switch p.Phase {
	case "train":
		bar.Describe(fmt.Sprintf("epoch %d/%d loss %.4f lr %.2e %.0f tok/s", p.Epoch, p.Epochs, p.Loss, p.LearningRate, p.TokensPerSec))
		bar.Set(p.Step, p.Steps)
	case "log", "eval":
		bar.Println(w, LogLine(p))
	}
}

// LogLine formats a "log" or "eval" progress report as HF Trainer's log
// line (a Python-style dict; eval metrics prefixed "eval_", sorted by name).
func LogLine(p Progress) string {
	if p.Phase == "eval" {
		parts := make([]string, 0, len(p.Valid)+2)
		for _, k := range slices.Sorted(maps.Keys(p.Valid)) {
			parts = append(parts, fmt.Sprintf("'eval_%s': %.4g", k, p.Valid[k]))
		}
		parts = append(parts, fmt.Sprintf("'epoch': %.2f", p.EpochFrac), fmt.Sprintf("'step': %d", p.Step))
		return "{" + strings.Join(parts, ", ") + "}"
	}
	line := fmt.Sprintf("{'loss': %.4f, 'grad_norm': %.4g, 'learning_rate': %.4g, 'epoch': %.2f, 'step': %d, 'train_tokens_per_second': %.1f, 'train_samples_per_second': %.2f",
		p.Loss, p.GradNorm, p.LearningRate, p.EpochFrac, p.Step, p.TokensPerSec, p.WindowsPerSec)
	if p.SkippedNonFinite > 0 {
		line += fmt.Sprintf(", 'skipped_nonfinite': %d", p.SkippedNonFinite)
	}
	return line + "}"
}
