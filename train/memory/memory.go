// Package memory estimates the memory a training step needs (weights,
// gradients, AdamW moments, activations at the given batch and length) and
// checks it against the memory the machine has, so a trainer stops with the
// flags that would fit before it loads any data.
//
// The activation counts are of the float32 tensors the GoMLX graphs of
// models/bert and models/t5 keep for the backward pass, per token and layer
// (h hidden, i intermediate, a heads, L key length):
//
//	BERT-family layer  13h + 3i + 3aL   (q/k/v, scores, softmax, dropout, two post-LN residuals, GELU FFN)
//	T5 encoder layer   7d + 4·inner + 5·d_ff (3·d_ff ungated) + 3aL
//	T5 decoder layer   10d + 7·inner + 5·d_ff + 3a(L_dec + L_enc)
//	T5 LM head         3·vocab per decoder token (logits, log-softmax, its gradient)
//
// plus one more layer for the backward pass's transient gradients, and
// the AdamW update's temporaries: train/trainer updates one variable at a
// time, holding its new weight, new first moment and √v denominator beside
// the old weight and moments (the new second moment takes the gradient's
// buffer), so three float32 copies of the largest variable, the word
// embeddings, are live at once. With
// per-block gradient checkpointing (models/remat) a layer keeps only its
// input (h or d per token) and two layers' worth are live at once: the
// block being recomputed and its transient gradients. It is an
// estimate (no allocator overhead, no compiled-graph scratch); docs/benchmarks.md
// compares it with measured peak RSS.
package memory

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/t5"
)

// LimitEnv overrides the available memory (bytes, or with a KiB/MiB/GiB/TiB
// or KB/MB/GB/TB suffix), e.g. to test the refusal or to leave room for other
// processes. Unset, /proc/meminfo MemAvailable is used.
const LimitEnv = "RAGFORGE_MEMORY_LIMIT"

const f32 = 4 // bytes per float32

// Measured peak RSS over Total on the pure-Go backend (the Go runtime,
// compiled graphs, inputs, the no-gradient passes), rounded up: Check
// compares Peak = Total × factor, not Total, with the available memory.
const (
	// FilterPeakFactor: `bench models` T5 mini 734 MiB for 639 (1.15),
	// small 3080 MiB for 2853 (1.08), before the update term was counted.
	FilterPeakFactor = 1.2
	// RetrieverPeakFactor: the largest measured/Total of the InfoNCE
	// updates in docs/benchmarks.md: BERT-small (512/4/8/2048) at
	// 4 × (1 + 7) × 256 tokens, passes of 1024 tokens, 1249 MiB for 1106
	// (1.13); at the real shapes, 4 × (1 + 7) × 512: bge-large
	// checkpointed 1.09, without at passes of 2 rows 0.92, bge-m3
	// checkpointed 1.17.
	RetrieverPeakFactor = 1.2

	// updateCopies is the number of float32 copies of the largest variable
	// the AdamW update holds beyond the weights, gradients and moments.
	updateCopies = 3
)

// Estimate is the memory of one training step, in bytes.
type Estimate struct {
	What        string // the model and shape, e.g. "xlm-roberta retriever, 4096 tokens/pass at length 512"
	Params      int64  // parameter count
	Weights     int64  // parameters, float32
	Gradients   int64  // the step's gradient and train/trainer's accumulator, float32
	Optimizer   int64  // AdamW first and second moments, float32
	Activations int64  // kept for the backward pass at the given batch and length
	Update      int64  // AdamW update temporaries: updateCopies float32 copies of the largest variable
	// PeakFactor is measured peak RSS over Total for this kind of step
	// (FilterPeakFactor, RetrieverPeakFactor); 0 means 1.
	PeakFactor float64
	// CheckpointedActivations is Activations with per-block gradient
	// checkpointing (only block inputs kept, one block recomputed at a
	// time): what WithCheckpointing puts in Activations.
	CheckpointedActivations int64
	// GradientCheckpointing says Activations are the checkpointed ones.
	GradientCheckpointing bool
}

// WithCheckpointing is e for a step with --gradient-checkpointing.
func (e Estimate) WithCheckpointing() Estimate {
	if !e.GradientCheckpointing {
		e.Activations, e.GradientCheckpointing = e.CheckpointedActivations, true
		e.What += ", gradient checkpointing"
	}
	return e
}

// Total is weights + gradients + optimizer + activations + update temporaries.
func (e Estimate) Total() int64 {
	return e.Weights + e.Gradients + e.Optimizer + e.Activations + e.Update
}

// Peak is the expected peak RSS: Total × PeakFactor.
func (e Estimate) Peak() int64 { return scale(e.Total(), e.PeakFactor) }

func scale(n int64, f float64) int64 {
	if f <= 0 {
		return n
	}
	return int64(float64(n) * f)
}

// String is a one-line report.
func (e Estimate) String() string {
	s := fmt.Sprintf("memory estimate for %s: peak RSS about %s (tensors %s = weights %s (%.1fM parameters) + gradients %s + AdamW state %s + activations %s",
		e.What, Bytes(e.Peak()), Bytes(e.Total()), Bytes(e.Weights), float64(e.Params)/1e6, Bytes(e.Gradients), Bytes(e.Optimizer), Bytes(e.Activations))
	if e.Update > 0 {
		s += " + update temporaries " + Bytes(e.Update)
	}
	return s + ")"
}

// withParams is the parameter-proportional part of a training step's
// estimate; largest is the largest variable's element count.
func withParams(what string, params float64, largest int) Estimate {
	p := int64(params)
	return Estimate{What: what, Params: p, Weights: f32 * p, Gradients: 2 * f32 * p, Optimizer: 2 * f32 * p,
		Update: updateCopies * f32 * int64(largest)}
}

// bertLayerPerToken is the float32 elements one BERT-family layer keeps per
// token at key length l.
func bertLayerPerToken(c bert.Config, l int) int64 {
	return int64(13*c.HiddenSize + 3*c.IntermediateSize + 3*c.NumAttentionHeads*l)
}

// Retriever estimates one InfoNCE update of a BERT-family bi-encoder of
// config c trained with GradCache (train/retriever): the activations of one
// encoder pass of tokensPerPass padded tokens (rows of length l, at least
// one row), whatever the batch size.
func Retriever(c bert.Config, modelType string, tokensPerPass, l int) Estimate {
	rows := max(1, tokensPerPass/l)
	tokens := int64(rows * l)
	e := withParams(fmt.Sprintf("%s retriever (%d rows × %d tokens per GradCache pass)", modelType, rows, l),
		c.DeclaredParameters()+float64(c.HiddenSize*c.HiddenSize+c.HiddenSize),
		max(c.VocabSize, c.IntermediateSize)*c.HiddenSize)
	layer := bertLayerPerToken(c, l)
	emb := int64(4 * c.HiddenSize)
	e.Activations = f32 * tokens * (emb + int64(c.NumHiddenLayers+1)*layer)
	e.PeakFactor = RetrieverPeakFactor
	e.CheckpointedActivations = f32 * tokens * (emb + int64(c.NumHiddenLayers)*int64(c.HiddenSize) + 2*layer)
	return e
}

// Filter estimates one micro-batch of the RAG² filter (train/filtertrain): a T5
// of config c on batch windows of encLen tokens with decLen decoder tokens
// ([label, </s>]: 2).
func Filter(c t5.Config, batch, encLen, decLen int) Estimate {
	e := withParams(fmt.Sprintf("t5 filter (batch %d × %d encoder + %d decoder tokens)", batch, encLen, decLen), c.DeclaredParameters(),
		max(c.VocabSize, c.DFF)*c.DModel)
	d, inner, a := c.DModel, c.NumHeads*c.DKV, c.NumHeads
	ff := 3 * c.DFF
	if strings.HasPrefix(c.FeedForwardProj, "gated-") {
		ff = 5 * c.DFF
	}
	encLayer := int64(7*d + 4*inner + ff + 3*a*encLen)
	decLayer := int64(10*d + 7*inner + ff + 3*a*(decLen+encLen))
	enc := int64(batch * encLen)
	dec := int64(batch * decLen)
	e.PeakFactor = FilterPeakFactor
	e.Activations = f32 * (enc*(int64(2*d)+int64(c.NumLayers+1)*encLayer) +
		dec*(int64(2*d)+int64(c.NumDecoderLayers+1)*decLayer+int64(3*c.VocabSize)))
	e.CheckpointedActivations = f32 * (enc*(int64(2*d)+int64(c.NumLayers*d)+2*encLayer) +
		dec*(int64(2*d)+int64(c.NumDecoderLayers*d)+2*decLayer+int64(3*c.VocabSize)))
	return e
}

// Available is the memory a trainer may use: $RAGFORGE_MEMORY_LIMIT when
// set, else /proc/meminfo MemAvailable; source says which. A limit that does
// not parse is an error, as is a MemAvailable that cannot be read
// (available 0, no error, where /proc/meminfo does not exist).
func Available() (avail int64, source string, err error) {
	if v, ok := os.LookupEnv(LimitEnv); ok {
		n, err := ParseBytes(v)
		if err != nil {
			return 0, "", fmt.Errorf("$%s: %w", LimitEnv, err)
		}
		return n, "$" + LimitEnv, nil
	}
	f, err := os.Open("/proc/meminfo")
	if os.IsNotExist(err) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("available memory: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, "", fmt.Errorf("available memory: /proc/meminfo: field %q: %w", "MemAvailable", err)
			}
			return kb * 1024, "/proc/meminfo MemAvailable", nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, "", fmt.Errorf("available memory: /proc/meminfo: %w", err)
	}
	return 0, "", fmt.Errorf("available memory: /proc/meminfo has no MemAvailable")
}

// ParseBytes reads a byte count: digits with an optional KiB, MiB, GiB, TiB
// (powers of 1024) or KB, MB, GB, TB (powers of 1000) suffix; "1.5GiB" is
// allowed. Zero, negative and malformed values are errors.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := 1.0
	for _, u := range []struct {
		suffix string
		m      float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.m
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || !(v > 0) || v*mult > 1<<62 {
		return 0, fmt.Errorf("%q: want a positive byte count, e.g. 8GiB or 500MB", s)
	}
	return int64(v * mult), nil
}

// Bytes formats n in binary units (GiB above 1 GiB, else MiB).
func Bytes(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// PeakRSS is the process's peak resident set size so far (getrusage
// ru_maxrss), in bytes; 0 where it cannot be read. It only grows: one
// measured step per process reads that step's peak.
func PeakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024 // Linux reports KiB
}

// Option is one way to run with less memory: the flags to pass and the
// estimate they give.
type Option struct {
	Flags    string
	Estimate Estimate
}

// Check returns nil when e's Peak fits in avail bytes (avail 0: unknown,
// always fits). Otherwise the error gives the estimate, the limit and its
// source, and the first of options that fits (each option's flags and
// peak), or says that even the weights, gradients and AdamW state do not fit.
func Check(e Estimate, avail int64, source string, options []Option) error {
	if avail <= 0 || e.Peak() <= avail {
		return nil
	}
	msg := fmt.Sprintf("%s exceeds the %s available (%s)", e, Bytes(avail), source)
	fits := false
	if c := e.WithCheckpointing(); !e.GradientCheckpointing && e.CheckpointedActivations > 0 && c.Peak() <= avail {
		msg += fmt.Sprintf("; --gradient-checkpointing fits (about %s, about one more forward pass per step)", Bytes(c.Peak()))
		fits = true
	}
	for _, o := range options {
		if o.Estimate.Peak() <= avail {
			return fmt.Errorf("%s; %s fits (about %s)", msg, o.Flags, Bytes(o.Estimate.Peak()))
		}
	}
	if fits {
		return errors.New(msg)
	}
	if fixed := scale(e.Total()-e.Activations, e.PeakFactor); fixed > avail {
		return fmt.Errorf("%s; the weights, gradients and AdamW state alone need %s: train a smaller model", msg, Bytes(fixed))
	}
	return fmt.Errorf("%s; no smaller batch or length tried fits", msg)
}
