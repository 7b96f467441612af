package web

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/ragforge/ragforge/data/tracker"
)

// seeded names the runs of seedStore that tests look at.
type seeded struct {
	total      int    // runs in the store
	evalRet    string // eval-retrieval, hybrid, ks 1,3,5,10
	trainA     string // train-filter, lr 3e-4, 300 steps, done
	trainB     string // train-filter, lr 1e-3: train/loss ends higher, valid/accuracy higher
	selflearn  string // selflearn, rounds 0..2
	stale      string // pipeline run whose process died
	running    string // eval-retrieval still running
	kindCounts map[string]int
}

// evalRetrievalMetrics returns the mean metrics cmd/ragforge eval retrieval
// logs (retrieval/eval names at ks 1,3,5,10, plus Success@k, MRR@10, MAP,
// R-Prec, Recall@100), scaled by q in (0, 1].
func evalRetrievalMetrics(q float64) map[string]float64 {
	m := map[string]float64{}
	for _, k := range []int{1, 3, 5, 10} {
		r := q * (1 - math.Exp(-float64(k)/4))
		m[fmt.Sprintf("P@%d", k)] = q * 0.55 / math.Sqrt(float64(k))
		m[fmt.Sprintf("Recall@%d", k)] = r
		m[fmt.Sprintf("Success@%d", k)] = math.Min(1, r*1.2)
		p := q * 0.55 / math.Sqrt(float64(k))
		m[fmt.Sprintf("F1@%d", k)] = 2 * p * r / (p + r)
		m[fmt.Sprintf("nDCG@%d", k)] = q * (0.35 + 0.03*float64(k))
	}
	m["MRR@10"], m["MAP"], m["R-Prec"], m["Recall@100"] = q*0.52, q*0.41, q*0.33, math.Min(1, q*1.1)
	return m
}

// seedStore fills a run store as a few days of use would: 22 runs of the
// commands' kinds with the metric names and step series they record (see
// metrics.js for the list), newest first by started_at.
func seedStore(t *testing.T) (*tracker.Store, seeded) {
	t.Helper()
	rs, err := tracker.Open(filepath.Join(t.TempDir(), "ragforge.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	rng := rand.New(rand.NewPCG(1, 2))
	s := seeded{kindCounts: map[string]int{}}
	base := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	n := 0
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// start records a run started n hours after base and finished after dur.
	start := func(kind string, cfg any, dur time.Duration, fail string) *tracker.Run {
		t.Helper()
		r, err := rs.Start(kind, cfg, "v0.9.0", "simplego+blas")
		must(err)
		started := base.Add(time.Duration(n) * 3 * time.Hour)
		n++
		s.total++
		s.kindCounts[kind]++
		must(func() error {
			_, err := rs.DB().Exec(`UPDATE runs SET started_at = ? WHERE id = ?`, started.Format(time.RFC3339Nano), r.ID)
			return err
		}())
		if dur > 0 {
			var ferr error
			if fail != "" {
				ferr = fmt.Errorf("%s", fail)
			}
			must(r.Finish(ferr))
			_, err := rs.DB().Exec(`UPDATE runs SET finished_at = ? WHERE id = ?`, started.Add(dur).Format(time.RFC3339Nano), r.ID)
			must(err)
		}
		return r
	}
	retrCfg := func(mode string, chunk int) map[string]any {
		return map[string]any{"corpus": map[string]any{"path": "data/ap/corpus", "chunk_size": chunk, "chunk_overlap": chunk / 4},
			"retriever": map[string]any{"mode": mode, "bm25": map[string]any{"k1": 0.9, "b": 0.4}, "dense_weight": 0.3},
			"ks":        []int{1, 3, 5, 10}, "relevance": "substring"}
	}
	for i, mode := range []string{"bm25", "dense", "hybrid", "hyde"} {
		r := start("eval-retrieval", retrCfg(mode, 512), 40*time.Second, "")
		must(r.LogMetrics(evalRetrievalMetrics(0.7+0.07*float64(i)), 0))
		if mode == "hybrid" {
			s.evalRet = r.ID
		}
	}

	// train filter: HF Trainer-style logging every 10 steps, validation
	// every 100 steps (train/filtertrain: train/*, valid/*).
	trainFilter := func(lr float64, steps int, lossBias float64, status string) *tracker.Run {
		cfg := map[string]any{"config": map[string]any{"model": "google/flan-t5-base", "learning_rate": lr, "epochs": 3,
			"batch_size": 8, "max_seq_length": 512, "warmup_ratio": 0.1, "logging_steps": 10, "eval_steps": 100},
			"train": "labels/train.jsonl", "valid": "labels/valid.jsonl"}
		dur := time.Duration(steps) * 2 * time.Second
		fail := ""
		if status == tracker.StatusFailed {
			fail = "train filter: step 120: context canceled"
		}
		r := start("train-filter", cfg, 0, "")
		for step := 10; step <= steps; step += 10 {
			x := float64(step)
			warm := math.Min(1, x/30)
			must(r.LogMetrics(map[string]float64{
				"train/loss":          0.25 + lossBias + 0.7*math.Exp(-x/120) + 0.03*rng.Float64(),
				"train/learning_rate": lr * warm * (1 - x/float64(steps+10)),
				"train/grad_norm":     0.6 + 2.5*math.Exp(-x/200) + 0.2*rng.Float64(),
			}, step))
			if step%100 == 0 {
				acc := 0.62 + 0.1*x/float64(steps) + lossBias/2
				must(r.LogMetrics(map[string]float64{"valid/accuracy": acc, "valid/precision": acc - 0.03, "valid/recall": acc + 0.05,
					"valid/f1": acc + 0.01, "valid/accuracy_helpful": acc + 0.08, "valid/accuracy_not_helpful": acc - 0.09,
					"valid/majority_baseline": 0.58, "valid/roc_auc": acc + 0.1}, step))
			}
		}
		if status != tracker.StatusRunning {
			var ferr error
			if fail != "" {
				ferr = fmt.Errorf("%s", fail)
			}
			must(r.Finish(ferr))
			started := base.Add(time.Duration(n-1) * 3 * time.Hour)
			_, err := rs.DB().Exec(`UPDATE runs SET finished_at = ? WHERE id = ?`, started.Add(dur).Format(time.RFC3339Nano), r.ID)
			must(err)
		}
		return r
	}
	s.trainA = trainFilter(3e-4, 300, 0, tracker.StatusDone).ID
	s.trainB = trainFilter(1e-3, 300, 0.04, tracker.StatusDone).ID
	trainFilter(3e-4, 120, 0, tracker.StatusFailed)

	for _, split := range []string{"valid", "test"} {
		r := start("eval-filter", map[string]any{"model": "out/filter/checkpoint-300", "data": "labels/" + split + ".jsonl", "threshold": 0.5}, 20*time.Second, "")
		must(r.LogMetrics(map[string]float64{"accuracy": 0.71, "precision": 0.69, "recall": 0.77, "f1": 0.73,
			"accuracy_helpful": 0.79, "accuracy_not_helpful": 0.62, "majority_baseline": 0.58, "roc_auc": 0.8}, 0))
	}
	for _, kind := range []string{"label-evidence", "label-perplexity"} {
		r := start(kind, map[string]any{"flags": map[string]any{"qa": "data/ap/qa.csv", "k": 5}, "negatives": 7}, 3*time.Minute, "")
		must(r.LogMetrics(map[string]float64{"labels_helpful": 241, "labels_not_helpful": 1687}, 0))
	}

	// selflearn: per-round evaluation of each variant at step = round,
	// generator loss per round, retriever training per round (steps restart).
	sl := start("selflearn", map[string]any{"rounds": 2, "queries_per_doc": 3, "n": 4, "temperature": 0.02, "num_negatives": 7,
		"epochs": 1, "retriever_lr": 2e-5, "eval_ks": []int{1, 10, 100}}, 0, "")
	variants := [][]string{{"bm25", "hybrid", "dense", "hyde"}, {"hybrid", "dense", "sl-hyde", "no-gen-tuning", "no-ret-tuning"},
		{"hybrid", "dense", "sl-hyde", "no-gen-tuning", "no-ret-tuning"}}
	for round := 1; round <= 2; round++ {
		for step := 1; step <= 20; step++ {
			must(sl.Metric(fmt.Sprintf("r%d/generator/loss", round), step, 2.4-0.04*float64(step)-0.2*float64(round)+0.05*rng.Float64()))
		}
		for step := 1; step <= 40; step++ {
			x := float64(step)
			must(sl.LogMetrics(map[string]float64{"loss": 1.9*math.Exp(-x/25) + 0.4 - 0.1*float64(round), "learning_rate": 2e-5 * math.Min(1, x/4) * (1 - x/41),
				"grad_norm": 4*math.Exp(-x/30) + 1, "epoch": x / 40}, step))
		}
	}
	for round, vs := range variants {
		for i, v := range vs {
			q := 0.6 + 0.05*float64(i) + 0.04*float64(round)
			logged := map[string]float64{}
			for name, val := range map[string]float64{"nDCG@10": q * 0.62, "Recall@1": q * 0.4, "Recall@10": q * 0.85, "Recall@100": math.Min(1, q*1.3), "MRR@10": q * 0.55} {
				logged[v+"/"+name] = val
			}
			must(sl.LogMetrics(logged, round))
		}
	}
	must(sl.Finish(nil))
	_, err = rs.DB().Exec(`UPDATE runs SET finished_at = ? WHERE id = ?`, base.Add(time.Duration(n-1)*3*time.Hour+5*time.Hour+12*time.Minute).Format(time.RFC3339Nano), sl.ID)
	must(err)
	s.selflearn = sl.ID

	ans := start("eval-answers", map[string]any{"ks": []int{1, 3, 5}, "judge": "http://127.0.0.1:8000/v1#judge-model", "limit": 50}, 12*time.Minute, "")
	m := map[string]float64{}
	for _, k := range []int{1, 3, 5} {
		f := float64(k)
		m[fmt.Sprintf("bleu@%d", k)] = 8 + f
		m[fmt.Sprintf("sentence_bleu@%d", k)] = 9 + f
		m[fmt.Sprintf("rougeL@%d", k)] = 0.21 + 0.02*f
		m[fmt.Sprintf("judge_errors@%d", k)] = float64(k - 1)
	}
	must(ans.LogMetrics(m, 0))
	mc := start("eval-mcqa", map[string]any{"conditions": "cot,rag,rag2", "limit": 20, "parse": "strict"}, 6*time.Minute, "")
	mm := map[string]float64{}
	for i, cond := range []string{"cot", "rag", "rag2"} {
		for j, ds := range []string{"mmlu", "medqa", "medmcqa", "pubmedqa"} {
			acc := 0.25 + 0.05*float64(i) + 0.01*float64(j)
			mm[cond+"/"+ds+"/accuracy"], mm[cond+"/"+ds+"/accuracy_ci_low"], mm[cond+"/"+ds+"/accuracy_ci_high"] = acc, acc-0.15, acc+0.2
			mm[cond+"/"+ds+"/parse_failures"] = float64(3 - i)
		}
		mm[cond+"/average/accuracy"] = 0.265 + 0.05*float64(i)
	}
	mm["mcnemar/cot_vs_rag2/p"] = 0.21875
	must(mc.LogMetrics(mm, 0))
	sens := start("eval-sensitivity", map[string]any{"corpus": "data/ap/corpus", "retriever": "hybrid", "variants": []string{"full", "rationale"}}, 4*time.Minute, "")
	must(sens.LogMetrics(map[string]float64{"length/full": 412, "length/rationale": 96, "perplexity/full": 7.9, "perplexity/rationale": 6.1,
		"rougeL/full": 0.24, "rougeL/rationale": 0.27, "pearson(length,rougeL)": -0.18, "spearman(length,rougeL)": -0.21}, 0))
	for _, mode := range []string{"bm25", "hybrid"} {
		r := start("eval-retrieval", retrCfg(mode, 256), 35*time.Second, "")
		must(r.LogMetrics(evalRetrievalMetrics(0.66), 0))
	}
	start("eval-retrieval", retrCfg("dense", 1024), time.Second, "load corpus data/ap/corpus: open data/ap/corpus/dataset_info.json: no such file or directory")
	start("label-import", map[string]string{"file": "reviewed.jsonl"}, 2*time.Second, "")
	start("eval-filter", map[string]any{"model": "out/filter", "data": "labels/valid.jsonl"}, time.Second,
		"no spiece.model, vocab.txt or tokenizer.json in out/filter")

	// A pipeline server whose process was killed: its status reads stale.
	// The store's schema only admits the statuses it writes itself, so the
	// test sets it past the check.
	stale := start("pipeline", map[string]any{"addr": "127.0.0.1:8080", "retriever": "hybrid", "filter": "out/filter/checkpoint-300"}, 0, "")
	for _, q := range []string{`PRAGMA ignore_check_constraints = ON`, `UPDATE runs SET status = 'stale' WHERE id = '` + stale.ID + `'`, `PRAGMA ignore_check_constraints = OFF`} {
		_, err := rs.DB().Exec(q)
		must(err)
	}
	s.stale = stale.ID
	s.running = start("eval-retrieval", retrCfg("hyde", 512), 0, "").ID
	return rs, s
}
