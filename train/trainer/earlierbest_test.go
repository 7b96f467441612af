package trainer

import "testing"

func TestStateEarlierBest(t *testing.T) {
	hist := []LogEntry{
		{Step: 10, Epoch: 1, Loss: 0.7, LearningRate: 1e-4}, {Step: 10, Epoch: 1, EvalAccuracy: 0.74},
		{Step: 20, Epoch: 2, Loss: 0.5, LearningRate: 5e-5}, {Step: 20, Epoch: 2, EvalAccuracy: 0.70},
	}
	for _, tc := range []struct {
		name    string
		s       State
		ok      bool
		best    string
		bestAcc float64
		ownAcc  float64
	}{
		{"last below an earlier epoch", State{GlobalStep: 20, BestMetric: 0.74, BestModelCheckpoint: "out/checkpoint-10", LogHistory: hist}, true, "checkpoint-10", 0.74, 0.70},
		{"the best itself", State{GlobalStep: 10, BestMetric: 0.74, BestModelCheckpoint: "out/checkpoint-10", LogHistory: hist[:2]}, false, "", 0, 0},
		{"no validation", State{GlobalStep: 20, BestMetric: -1, LogHistory: []LogEntry{hist[0], hist[2]}}, false, "", 0, 0},
		{"a tie is no better", State{GlobalStep: 20, BestMetric: 0.70, BestModelCheckpoint: "checkpoint-10", LogHistory: hist}, false, "", 0, 0},
	} {
		best, bestAcc, ownAcc, ok := tc.s.EarlierBest()
		if ok != tc.ok || best != tc.best || bestAcc != tc.bestAcc || ownAcc != tc.ownAcc {
			t.Errorf("%s: EarlierBest() = %q %v %v %v, want %q %v %v %v", tc.name, best, bestAcc, ownAcc, ok, tc.best, tc.bestAcc, tc.ownAcc, tc.ok)
		}
	}
}
