package demo

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A step's lanes run side by side: each lane's stages see what earlier
// steps made, the held-back lane's log comes after the first lane's, and
// afterwards the step's artifacts, metrics and summary lines are all in
// st, the summary in the step's stage order.
func TestStepLanesRunSideBySide(t *testing.T) {
	var log bytes.Buffer
	st := &state{log: &log, dirs: map[string]string{"models": "m"}, metric: map[string]map[string]float64{"earlier": {"x": 1}}}
	ready := make(chan struct{})
	mk := func(name string, run func(st *state) error) stage {
		return stage{name, func(_ context.Context, st *state) (Stage, error) {
			if st.dirs["models"] != "m" || st.metric["earlier"]["x"] != 1 {
				return Stage{}, errors.New(name + ": earlier steps' artifacts missing")
			}
			st.log.Write([]byte("output of " + name + "\n"))
			st.dirs[name] = "dir-" + name
			return Stage{Metrics: map[string]float64{name: 1}}, run(st)
		}}
	}
	// a1 waits for b1: were the lanes run one after the other, it would
	// time out.
	a1 := mk("a1", func(*state) error {
		select {
		case <-ready:
			return nil
		case <-time.After(time.Minute):
			return errors.New("a1: lane b never ran beside lane a")
		}
	})
	a2 := mk("a2", func(st *state) error {
		if st.dirs["a1"] == "" {
			return errors.New("a2: a1's artifact missing")
		}
		return nil
	})
	b1 := mk("b1", func(*state) error { close(ready); return nil })
	b2 := mk("b2", func(st *state) error {
		if st.metric["b1"]["b1"] != 1 {
			return errors.New("b2: b1's metrics missing")
		}
		return nil
	})
	if err := st.runStep(context.Background(), step{{a1, a2}, {b1, b2}}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range st.lines {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != "a1,a2,b1,b2" {
		t.Fatalf("summary stages %s, want a1,a2,b1,b2", got)
	}
	for _, n := range []string{"a1", "a2", "b1", "b2"} {
		if st.dirs[n] != "dir-"+n || st.metric[n][n] != 1 {
			t.Fatalf("stage %s: dir %q, metrics %v after the step", n, st.dirs[n], st.metric[n])
		}
	}
	out := log.String()
	if i, j := strings.Index(out, "output of a2"), strings.Index(out, "output of b1"); i < 0 || j < i {
		t.Fatalf("lane b's output should follow lane a's:\n%s", out)
	}
}

// A failing lane fails the step, naming its stage, after the other lane has
// finished.
func TestStepLaneError(t *testing.T) {
	st := &state{log: &bytes.Buffer{}, dirs: map[string]string{}, metric: map[string]map[string]float64{}}
	ok := stage{"fine", func(context.Context, *state) (Stage, error) { return Stage{}, nil }}
	bad := stage{"broken", func(context.Context, *state) (Stage, error) { return Stage{}, errors.New("boom") }}
	err := st.runStep(context.Background(), step{{ok}, {bad}})
	if err == nil || !strings.Contains(err.Error(), `"broken"`) || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err = %v, want the broken stage's error", err)
	}
}

// The demo's steps are its stages in `make demo`'s order, the filter lane
// beside the self-learning lane; the filter lane trains one member per
// FilterEnsembleSeeds seed between the first filter and the evaluation,
// and with FilterCalibrate calibrates before evaluating.
func TestSteps(t *testing.T) {
	lanes := func(o Options) string {
		var ls []string
		for _, s := range steps(o) {
			var lane []string
			for _, l := range s {
				lane = append(lane, stageNames(l))
			}
			ls = append(ls, strings.Join(lane, " | "))
		}
		return strings.Join(ls, "\n")
	}
	want := `retrieval: BM25
tokenizers
models init
retrieval: hybrid (base)
labels: evidence
labels: ICT (corpus only)
filter: train → filter: eval | selflearn: 1 round (ICT) → retrieval: hybrid (tuned)
export
serve + /v1/pipeline`
	if got := lanes(DefaultOptions()); got != want {
		t.Errorf("steps:\n%s\nwant:\n%s", got, want)
	}
	for _, tc := range []struct {
		seeds     []int64
		calibrate bool
		want      string
	}{
		{nil, false, "filter: train → filter: eval"},
		{nil, true, "filter: train → filter: calibrate → filter: eval"},
		{[]int64{7}, false, "filter: train → filter: train member (seed 7) → filter: eval"},
		{[]int64{7, 9}, false, "filter: train → filter: train member (seed 7) → filter: train member (seed 9) → filter: eval"},
	} {
		if got := stageNames(filterLane(Options{FilterEnsembleSeeds: tc.seeds, FilterCalibrate: tc.calibrate})); got != tc.want {
			t.Errorf("seeds %v calibrate %v: lane %s, want %s", tc.seeds, tc.calibrate, got, tc.want)
		}
	}
}
