package trainer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/internal/atomicfile"
	"github.com/ragforge/ragforge/internal/catch"
	"github.com/ragforge/ragforge/models/safetensors"
)

// File names inside a checkpoint directory (HF Trainer layout, with the
// optimiser state in safetensors instead of optimizer.pt).
const (
	StateFile     = "trainer_state.json"
	OptimizerFile = "optimizer.safetensors"
	checkpointPfx = "checkpoint-"
	BestLink      = "best" // symlink in the output directory to the best checkpoint
)

// stepTensor is the optimiser-file entry holding the update count, and
// skippedTensor the count of skipped non-finite updates (absent in files
// written before it existed: 0).
const (
	stepTensor    = "step"
	skippedTensor = "skipped_nonfinite"
)

var stDTypes = map[dtypes.DType]safetensors.DType{
	dtypes.Float32: safetensors.F32, dtypes.Float64: safetensors.F64,
	dtypes.Int64: safetensors.I64, dtypes.Int32: safetensors.I32, dtypes.Uint64: safetensors.U64,
}

// SaveState writes the optimiser state to path (safetensors, atomic): every
// variable under StateScope except the gradient accumulators (zero between
// updates), the context RNG state (dropout stream), the update count and the
// count of skipped non-finite updates.
// Tensor names are the variables' full context paths.
func (t *Trainer) SaveState(path string) error {
	var out []*safetensors.Tensor
	var err error
	for v := range t.ctx.IterVariables() {
		full := v.Scope() + context.ScopeSeparator + v.Name()
		if v.Scope() == context.RootScope {
			full = context.ScopeSeparator + v.Name()
		}
		keep := (strings.HasPrefix(v.Scope(), StateScope+"/") && !strings.HasPrefix(v.Scope(), StateScope+"/acc")) ||
			(v.Scope() == context.RootScope && v.Name() == context.RNGStateVariableName)
		if !keep || !v.HasValue() {
			continue
		}
		val, verr := v.Value()
		if verr != nil {
			return fmt.Errorf("save trainer state %s: variable %q: %w", path, full, verr)
		}
		dt, ok := stDTypes[val.DType()]
		if !ok {
			return fmt.Errorf("save trainer state %s: variable %q: unsupported dtype %s", path, full, val.DType())
		}
		st := &safetensors.Tensor{Name: full, DType: dt, Shape: val.Shape().Dimensions}
		if err = val.ConstBytes(func(b []byte) { st.Data = append([]byte(nil), b...) }); err != nil {
			return fmt.Errorf("save trainer state %s: variable %q: %w", path, full, err)
		}
		out = append(out, st)
	}
	out = append(out, safetensors.FromInt64(stepTensor, nil, []int64{int64(t.step)}),
		safetensors.FromInt64(skippedTensor, nil, []int64{int64(t.skipped)}))
	if err := safetensors.WriteFile(path, out, map[string]string{"format": "ragforge-trainer"}); err != nil {
		return fmt.Errorf("save trainer state: %w", err)
	}
	return nil
}

// LoadState restores what SaveState wrote: the update counts, the moments
// (created or overwritten) and the RNG state. Call it before the first Step.
// Errors name the file and tensor: a missing step, a moment whose parameter
// does not exist or has another shape, an unknown dtype.
func (t *Trainer) LoadState(path string) error {
	f, err := safetensors.ReadFile(path)
	if err != nil {
		return fmt.Errorf("load trainer state: %w", err)
	}
	st, ok := f.Tensors[stepTensor]
	if !ok {
		return fmt.Errorf("load trainer state %s: tensor %q missing", path, stepTensor)
	}
	steps, err := st.Int64()
	if err != nil || len(steps) != 1 || steps[0] < 0 {
		return fmt.Errorf("load trainer state %s: tensor %q: want one non-negative int64 (%v)", path, stepTensor, err)
	}
	skipped := int64(0)
	if sk, ok := f.Tensors[skippedTensor]; ok {
		v, err := sk.Int64()
		if err != nil || len(v) != 1 || v[0] < 0 {
			return fmt.Errorf("load trainer state %s: tensor %q: want one non-negative int64 (%v)", path, skippedTensor, err)
		}
		skipped = v[0]
	}
	for _, name := range f.Names() {
		if name == stepTensor || name == skippedTensor {
			continue
		}
		tt := f.Tensors[name]
		i := strings.LastIndex(name, context.ScopeSeparator)
		scope, vn := name[:i], name[i+1:]
		if scope == "" {
			scope = context.RootScope
		}
		var dt dtypes.DType = dtypes.InvalidDType
		for k, v := range stDTypes {
			if v == tt.DType {
				dt = k
			}
		}
		if dt == dtypes.InvalidDType {
			return fmt.Errorf("load trainer state %s: tensor %q: unsupported dtype %s", path, name, tt.DType)
		}
		if strings.HasPrefix(scope, StateScope+"/") {
			// The moment's parameter must exist with the same shape.
			rest := strings.TrimPrefix(scope, StateScope+"/")
			j := strings.Index(rest, "/")
			pScope := context.RootScope
			if j >= 0 {
				pScope = rest[j:]
			}
			p := t.ctx.GetVariableByScopeAndName(pScope, vn)
			if p == nil {
				return fmt.Errorf("load trainer state %s: tensor %q: model has no parameter %s/%s", path, name, pScope, vn)
			}
			if !equalDims(p.Shape().Dimensions, tt.Shape) {
				return fmt.Errorf("load trainer state %s: tensor %q: shape %v, parameter has %v", path, name, tt.Shape, p.Shape().Dimensions)
			}
		}
		val := tensors.FromShape(shapes.Make(dt, tt.Shape...))
		if err := val.MutableBytes(func(b []byte) { copy(b, tt.Data) }); err != nil {
			return fmt.Errorf("load trainer state %s: tensor %q: %w", path, name, err)
		}
		if err := catch.Do(func() {
			v := t.ctx.InAbsPath(scope).Checked(false).VariableWithShape(vn, val.Shape()).SetTrainable(false)
			if err := v.SetValue(val); err != nil {
				panic(err)
			}
		}); err != nil {
			return fmt.Errorf("load trainer state %s: tensor %q: %w", path, name, err)
		}
	}
	t.step, t.skipped = int(steps[0]), int(skipped)
	return nil
}

func equalDims(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// State is trainer_state.json: where a run stands, enough to resume it with
// the same data order (HF TrainerState keys where they exist).
type State struct {
	GlobalStep   int     `json:"global_step"`    // updates completed
	Epoch        int     `json:"epoch"`          // 0-based epoch in progress
	BatchInEpoch int     `json:"batch_in_epoch"` // micro-batches of Epoch already consumed
	Seed         int64   `json:"seed"`           // data-order and dropout seed
	DataHash     string  `json:"data_hash"`      // fingerprint of the training data; resume refuses other data
	ConfigHash   string  `json:"config_hash"`    // fingerprint of the trajectory-relevant settings
	BestMetric   float64 `json:"best_metric"`    // best validation metric so far (NaN-free; -1 = none)
	// BestModelCheckpoint is the directory name (relative to the output dir) of the best checkpoint.
	BestModelCheckpoint     string         `json:"best_model_checkpoint"`
	EvalsWithoutImprovement int            `json:"evals_without_improvement"`
	LogHistory              []LogEntry     `json:"log_history"`
	Extra                   map[string]any `json:"extra,omitempty"`
}

// LogEntry is one line of the run's history: a training update or an evaluation.
type LogEntry struct {
	Step         int     `json:"step"`
	Epoch        float64 `json:"epoch"`
	Loss         float64 `json:"loss,omitempty"`
	LearningRate float64 `json:"learning_rate,omitempty"`
	GradNorm     float64 `json:"grad_norm,omitempty"`
	EvalAccuracy float64 `json:"eval_accuracy,omitempty"`
}

// CheckpointName is "checkpoint-<step>".
func CheckpointName(step int) string { return checkpointPfx + strconv.Itoa(step) }

// WriteCheckpoint creates outputDir/checkpoint-<step> atomically: fill writes
// the files into a temporary directory next to it, which is fsynced and
// renamed into place (an existing directory of that name is replaced), so a
// crash leaves either no checkpoint or a complete one. Returns the final path.
func WriteCheckpoint(outputDir string, step int, fill func(dir string) error) (string, error) {
	final := filepath.Join(outputDir, CheckpointName(step))
	if err := os.MkdirAll(outputDir, 0o755); err != nil {
		return "", fmt.Errorf("write checkpoint %s: %w", final, err)
	}
	tmp, err := os.MkdirTemp(outputDir, "."+CheckpointName(step)+".tmp-")
	if err != nil {
		return "", fmt.Errorf("write checkpoint %s: %w", final, err)
	}
	defer os.RemoveAll(tmp) // no-op after the rename
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("write checkpoint %s: %w", final, err)
	}
	if err := fill(tmp); err != nil {
		return "", fmt.Errorf("write checkpoint %s: %w", final, err)
	}
	if err := syncDir(tmp, true); err != nil {
		return "", fmt.Errorf("write checkpoint %s: %w", final, err)
	}
	if _, err := os.Stat(final); err == nil {
		old := tmp + ".old"
		if err := os.Rename(final, old); err != nil {
			return "", fmt.Errorf("write checkpoint %s: %w", final, err)
		}
		defer os.RemoveAll(old)
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", fmt.Errorf("write checkpoint %s: %w", final, err)
	}
	if err := syncDir(outputDir, false); err != nil {
		return "", fmt.Errorf("write checkpoint %s: %w", final, err)
	}
	return final, nil
}

// syncDir fsyncs the regular files of dir (when files) and dir itself.
func syncDir(dir string, files bool) error {
	if files {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if !e.Type().IsRegular() {
				continue
			}
			f, err := os.Open(filepath.Join(dir, e.Name()))
			if err != nil {
				return err
			}
			err = f.Sync()
			f.Close()
			if err != nil {
				return err
			}
		}
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// WriteState writes dir/trainer_state.json (indented JSON).
func WriteState(dir string, s State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(dir, StateFile), err)
	}
	return atomicfile.WriteBytes(filepath.Join(dir, StateFile), append(b, '\n'), 0o644)
}

// ReadState reads dir/trainer_state.json.
func ReadState(dir string) (State, error) {
	var s State
	path := filepath.Join(dir, StateFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return s, fmt.Errorf("read trainer state: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("read trainer state %s: %w", path, err)
	}
	return s, nil
}

// Resume reads checkpoint dir's state, checks it was made with the data and
// settings of cur (DataHash, ConfigHash; argsFile names where the settings
// are written, for the error), restores t's optimizer state from it and
// checks the two agree on the global step. It returns the checkpoint's
// state, from which training goes on.
func (t *Trainer) Resume(dir string, cur State, argsFile string) (State, error) {
	old, err := ReadState(dir)
	if err != nil {
		return State{}, fmt.Errorf("%s: %w", dir, err)
	}
	if old.DataHash != cur.DataHash {
		return State{}, fmt.Errorf("%s: training data differ from the run's (data_hash %s, now %s)", dir, old.DataHash, cur.DataHash)
	}
	if old.ConfigHash != cur.ConfigHash {
		return State{}, fmt.Errorf("%s: settings differ from the run's (see its %s)", dir, argsFile)
	}
	if err := t.LoadState(filepath.Join(dir, OptimizerFile)); err != nil {
		return State{}, fmt.Errorf("%s: %w", dir, err)
	}
	if t.GlobalStep() != old.GlobalStep {
		return State{}, fmt.Errorf("%s: optimizer step %d, trainer_state.json global_step %d", dir, t.GlobalStep(), old.GlobalStep)
	}
	return old, nil
}

// Checkpoints lists the complete checkpoint directories of outputDir
// (checkpoint-<step> holding trainer_state.json) by increasing step.
// Temporary directories of interrupted writes are ignored.
func Checkpoints(outputDir string) ([]string, error) {
	ents, err := os.ReadDir(outputDir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	type ck struct {
		step int
		dir  string
	}
	var cks []ck
	for _, e := range ents {
		n, ok := strings.CutPrefix(e.Name(), checkpointPfx)
		if !ok || !e.IsDir() {
			continue
		}
		step, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		dir := filepath.Join(outputDir, e.Name())
		if _, err := os.Stat(filepath.Join(dir, StateFile)); err != nil {
			continue
		}
		cks = append(cks, ck{step, dir})
	}
	sort.Slice(cks, func(i, j int) bool { return cks[i].step < cks[j].step })
	out := make([]string, len(cks))
	for i, c := range cks {
		out[i] = c.dir
	}
	return out, nil
}

// LatestCheckpoint returns the complete checkpoint with the highest step, or "" if none.
func LatestCheckpoint(outputDir string) (string, error) {
	cks, err := Checkpoints(outputDir)
	if err != nil || len(cks) == 0 {
		return "", err
	}
	return cks[len(cks)-1], nil
}

// SetBest points outputDir/best at the checkpoint directory name (a relative
// symlink, replaced atomically by rename).
func SetBest(outputDir, checkpointName string) error {
	link := filepath.Join(outputDir, BestLink)
	tmp := link + ".tmp"
	os.Remove(tmp)
	if err := os.Symlink(checkpointName, tmp); err != nil {
		return fmt.Errorf("set best checkpoint: %w", err)
	}
	if err := os.Rename(tmp, link); err != nil {
		return fmt.Errorf("set best checkpoint: %w", err)
	}
	return nil
}

// ResolveModelDir maps a directory a user passes as a model to the model
// directory inside it. A directory holding config.json is a model already.
// A training output directory (Hugging Face users pass the output dir, where
// Trainer.save_model leaves the final model) resolves to its best
// checkpoint (the BestLink, or BestModelCheckpoint of the latest state),
// else its latest one; which says "best" or "latest". Errors: dir is neither
// a model nor an output directory with a checkpoint.
func ResolveModelDir(dir string) (resolved, which string, err error) {
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil {
		return dir, "", nil
	}
	if t, err := filepath.EvalSymlinks(filepath.Join(dir, BestLink)); err == nil {
		if _, err := os.Stat(filepath.Join(t, "config.json")); err == nil {
			return filepath.Join(dir, filepath.Base(t)), "best", nil
		}
	}
	latest, err := LatestCheckpoint(dir)
	if err != nil {
		return "", "", err
	}
	if latest == "" {
		return "", "", fmt.Errorf("%s: no config.json, and no %s<step> checkpoint of a training run", dir, checkpointPfx)
	}
	if s, err := ReadState(latest); err == nil && s.BestModelCheckpoint != "" {
		best := filepath.Join(dir, filepath.Base(s.BestModelCheckpoint))
		if _, err := os.Stat(filepath.Join(best, "config.json")); err == nil {
			return best, "best", nil
		}
	}
	return latest, "latest", nil
}

// EarlierBest reports whether an earlier checkpoint of the run scored
// higher on validation than the one whose state s is: its directory name
// and accuracy, and this checkpoint's (from the evaluation logged at
// GlobalStep). ok is false without validation, or when this checkpoint is
// the best. Evaluating or shipping the last checkpoint is often right
// (best is chosen on the validation set), but it should be said.
func (s State) EarlierBest() (best string, bestAcc, ownAcc float64, ok bool) {
	own := -1.0
	for _, e := range s.LogHistory {
		if e.Step == s.GlobalStep && e.Loss == 0 && e.LearningRate == 0 {
			own = e.EvalAccuracy
		}
	}
	if own < 0 || s.BestModelCheckpoint == "" || filepath.Base(s.BestModelCheckpoint) == CheckpointName(s.GlobalStep) || s.BestMetric <= own {
		return "", 0, 0, false
	}
	return filepath.Base(s.BestModelCheckpoint), s.BestMetric, own, true
}
