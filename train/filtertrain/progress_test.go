package filtertrain

import "testing"

func TestLogLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Progress
		want string
	}{
		{"log", Progress{Phase: "log", Loss: 0.69314, GradNorm: 1.25, LearningRate: 3e-5, EpochFrac: 0.5, Step: 10, TokensPerSec: 1234.56, WindowsPerSec: 7.891},
			"{'loss': 0.6931, 'grad_norm': 1.25, 'learning_rate': 3e-05, 'epoch': 0.50, 'step': 10, 'train_tokens_per_second': 1234.6, 'train_samples_per_second': 7.89}"},
		{"log skipped", Progress{Phase: "log", Loss: 1, Step: 2, SkippedNonFinite: 3},
			"{'loss': 1.0000, 'grad_norm': 0, 'learning_rate': 0, 'epoch': 0.00, 'step': 2, 'train_tokens_per_second': 0.0, 'train_samples_per_second': 0.00, 'skipped_nonfinite': 3}"},
		{"eval", Progress{Phase: "eval", EpochFrac: 1, Step: 20, Valid: map[string]float64{"loss": 0.5, "accuracy": 0.875}},
			"{'eval_accuracy': 0.875, 'eval_loss': 0.5, 'epoch': 1.00, 'step': 20}"},
	} {
		if got := LogLine(tc.p); got != tc.want {
			t.Errorf("%s: LogLine = %s\nwant %s", tc.name, got, tc.want)
		}
	}
}
