package filter

import (
	"bytes"
	"fmt"
	"testing"
)

// benchExamples are n distinct examples of realistic size (~300 bytes each).
func benchExamples(n int) []Example {
	out := make([]Example, n)
	for i := range out {
		out[i] = Example{
			ID:          fmt.Sprintf("q%d#d%d#0", i/10, i),
			Question:    Instruction(fmt.Sprintf("Fixar em formol tamponado a 10%% durante %d horas antes do processamento histológico do espécime.", i%48), fmt.Sprintf("Qual é o tempo de fixação %d?", i)),
			Answer:      []string{Helpful, NotHelpful}[i%2],
			DatasetName: "ap_protocols",
		}
	}
	return out
}

// BenchmarkParseExamples reads the same 32,000 records as one JSON array (the
// RAG² release layout) and as JSONL; both must be linear in the file size.
//
//	go test ./label -run '^$' -bench ParseExamples -benchmem
func BenchmarkParseExamples(b *testing.B) {
	ex := benchExamples(32000)
	for _, format := range []Format{FormatJSON, FormatJSONL} {
		var buf bytes.Buffer
		if err := EncodeExamples(&buf, format, ex); err != nil {
			b.Fatal(err)
		}
		data := buf.Bytes()
		b.Run(string(format), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				got, err := ParseExamples(data, "bench."+string(format))
				if err != nil || len(got) != len(ex) {
					b.Fatalf("%d examples, %v", len(got), err)
				}
			}
		})
	}
}
