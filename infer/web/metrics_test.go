package web

import (
	"fmt"
	"testing"
)

func TestDirection(t *testing.T) {
	for _, c := range []struct {
		name, want string
	}{
		{"loss", LowerIsBetter},
		{"train/loss", LowerIsBetter},
		{"eval_loss", LowerIsBetter},
		{"r2/generator/loss", LowerIsBetter},
		{"perplexity/full", LowerIsBetter},
		{"latency_ms", LowerIsBetter},
		{"judge_errors@5", LowerIsBetter},
		{"nDCG@10", HigherIsBetter},
		{"ndcg@10", HigherIsBetter},
		{"recall@4", HigherIsBetter},
		{"success@1", HigherIsBetter},
		{"mrr@10", HigherIsBetter},
		{"map", HigherIsBetter},
		{"R-Prec", HigherIsBetter},
		{"sl-hyde/Recall@10", HigherIsBetter},
		{"valid/accuracy", HigherIsBetter},
		{"accuracy_not_helpful", HigherIsBetter},
		{"rougeL@5", HigherIsBetter},
		{"train/learning_rate", NoDirection},
		{"grad_norm", NoDirection},
		{"epoch", NoDirection},
		{"labels_helpful", NoDirection},
		{"length/full", NoDirection},
		{"pearson(length,rougeL)", NoDirection},
		{"valid/majority_baseline", NoDirection},
	} {
		if got := Direction(c.name); got != c.want {
			t.Errorf("Direction(%q) = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestJudge(t *testing.T) {
	for _, c := range []struct {
		dir  string
		a, b float64
		want string
	}{
		{LowerIsBetter, 1.2, 1.5, ChangeWorse}, // a loss that went up is worse
		{LowerIsBetter, 1.5, 1.2, ChangeBetter},
		{HigherIsBetter, 0.5, 0.75, ChangeBetter},
		{HigherIsBetter, 0.75, 0.5, ChangeWorse},
		{HigherIsBetter, 0.5, 0.5, ChangeSame},
		{NoDirection, 1e-4, 3e-4, ""},
	} {
		if got := judge(c.dir, c.a, c.b); got != c.want {
			t.Errorf("judge(%q, %v, %v) = %q, want %q", c.dir, c.a, c.b, got, c.want)
		}
	}
}

func TestHeadline(t *testing.T) {
	for _, c := range []struct {
		name  string
		final map[string]float64
		want  string
	}{
		{"eval retrieval", evalRetrievalMetrics(0.8), "nDCG@10 Recall@10 MRR@10"},
		{"eval retrieval lower-case", map[string]float64{"ndcg@10": 0.5, "recall@4": 0.6, "success@1": 0.3, "mrr@10": 0.4}, "ndcg@10 mrr@10 recall@4"},
		{"eval retrieval at other cutoffs", map[string]float64{"nDCG@5": 0.4, "nDCG@20": 0.5, "Recall@5": 0.6, "Recall@20": 0.7, "P@5": 0.2}, "nDCG@20 Recall@20 P@5"},
		{"train filter", map[string]float64{"train/loss": 0.3, "train/learning_rate": 1e-4, "train/grad_norm": 1, "valid/accuracy": 0.7, "valid/f1": 0.72, "valid/roc_auc": 0.8}, "valid/accuracy valid/f1 train/loss"},
		{"selflearn", map[string]float64{"hybrid/nDCG@10": 0.4, "sl-hyde/nDCG@10": 0.5, "sl-hyde/Recall@10": 0.7, "loss": 0.3, "learning_rate": 0}, "sl-hyde/nDCG@10 sl-hyde/Recall@10 hybrid/nDCG@10"},
		{"eval answers", map[string]float64{"bleu@1": 9, "bleu@5": 13, "rougeL@1": 0.2, "rougeL@5": 0.3, "judge_errors@5": 2}, "rougeL@5 bleu@5 judge_errors@5"},
		{"labels", map[string]float64{"labels_helpful": 241, "labels_not_helpful": 1687}, "labels_helpful labels_not_helpful"},
		{"no direction only", map[string]float64{"learning_rate": 1e-4}, ""},
		{"none", nil, ""},
	} {
		var got string
		for i, h := range Headline(c.final) {
			if i > 0 {
				got += " "
			}
			got += h.Name
			if h.Value != c.final[h.Name] {
				t.Errorf("%s: %s = %v, want %v", c.name, h.Name, h.Value, c.final[h.Name])
			}
		}
		if got != c.want {
			t.Errorf("%s: headline %q, want %q", c.name, got, c.want)
		}
	}
}

func ExampleDirection() {
	for _, n := range []string{"train/loss", "nDCG@10", "learning_rate"} {
		fmt.Printf("%s: %q\n", n, Direction(n))
	}
	// Output:
	// train/loss: "lower"
	// nDCG@10: "higher"
	// learning_rate: ""
}

// TestHeadlineMCQA: an eval mcqa run's row shows MIRAGE's average per
// condition, rag2 first, not per-dataset counts or CI bounds.
func TestHeadlineMCQA(t *testing.T) {
	final := map[string]float64{"cot/average/accuracy": 0.25, "rag/average/accuracy": 0.3, "rag2/average/accuracy": 0.35,
		"cot/medqa/accuracy_ci_low": 0.1, "cot/medqa/count": 20, "rag2/filter/mean_kept": 2}
	got := Headline(final)
	if len(got) != 3 || got[0].Name != "rag2/average/accuracy" || got[1].Name != "rag/average/accuracy" || got[2].Name != "cot/average/accuracy" {
		t.Errorf("Headline = %+v", got)
	}
}
