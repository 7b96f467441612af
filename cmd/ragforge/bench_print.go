package main

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// printBenchModels prints the training, decoder and LoRA tables.
func printBenchModels(out io.Writer, results []benchModelResult) error {
	mib := func(n int64) float64 { return float64(n) / (1 << 20) }
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	if slices.ContainsFunc(results, func(r benchModelResult) bool { return r.Result != nil || r.Retriever != nil }) {
		fmt.Fprintln(tw, "MODEL\tSTEP SHAPE\tTRAIN TOK/S\tMS/STEP MIN\tMS/STEP MEDIAN\tINFER RATE\tCOMPILE MS\tPEAK RSS MiB\tEXPECTED PEAK MiB\tBACKEND")
	}
	for _, r := range results {
		if r.Result == nil && r.Retriever == nil {
			continue
		}
		if f := r.Result; f != nil {
			fmt.Fprintf(tw, "%s\t%d×%d\t%.0f\t%.0f\t%.0f\t%.1f ex/s\t%.0f\t%.0f\t%.0f\t%s\n", r.Name, f.BatchSize, f.EncLength,
				f.TrainTokensPerSec, f.MsPerStepMin, f.MsPerStepMedian, f.InferExamplesPerSec, f.CompileMs, mib(r.PeakRSS), mib(r.Estimate.Peak()), r.Backend)
			continue
		}
		s := r.Retriever
		shape := fmt.Sprintf("%d×(1+%d)×%d", s.Queries, s.Negatives, s.Length)
		if s.MsPerStepMedian == 0 {
			shape = "encode only"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f\t%.0f\t%.2f passages/s @%d %s\t%.0f\t%.0f\t%.0f\t%s\n", r.Name, shape,
			s.TrainTokensPerSec, s.MsPerStepMin, s.MsPerStepMedian, s.EncodePassagesPerSec, s.EncodeLength, s.EncodeDType, s.CompileMs, mib(r.PeakRSS), mib(r.Estimate.Peak()), r.Backend)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	if slices.ContainsFunc(results, func(r benchModelResult) bool { return r.Decoder != nil }) {
		fmt.Fprintln(tw, "DECODER\tPAIRS×(PROMPT+CONT)\tPPL MS MIN\tPPL MS MEDIAN\tTOK/S\tGEN MS/STEP\tCOMPILE MS\tINIT MS\tPEAK RSS MiB\tBACKEND")
	}
	for _, r := range results {
		if d := r.Decoder; d != nil {
			fmt.Fprintf(tw, "%s\t%d×(%d+%d)\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%s\n", r.Name, d.Pairs, d.PromptLen, d.ContLen,
				d.PerplexityMsMin, d.PerplexityMsMedian, d.TokensPerSec, d.MsPerStep, d.CompileMs, d.InitMs, mib(r.PeakRSS), r.Backend)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range results {
		if l := r.LoRA; l != nil {
			tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "LORA STEP\tBATCH×LEN\tTRAIN TOK/S\tMS/STEP MIN\tMS/STEP MEDIAN\tCOMPILE MS\tLORA PARAMS\tADAMW FLOATS\tPEAK RSS MiB\tBACKEND")
			fmt.Fprintf(tw, "%s\t%d×%d\t%.0f\t%.0f\t%.0f\t%.0f\t%d\t%d\t%.0f\t%s\n", r.Name, l.Batch, l.SeqLen, l.TokensPerSec, l.MsPerStepMin,
				l.MsPerStepMedian, l.CompileMs, l.TrainableParams, l.OptimizerFloats, mib(r.PeakRSS), r.Backend)
			return tw.Flush()
		}
	}
	return nil
}
