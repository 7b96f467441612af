package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestFilter(t *testing.T) {
	in, err := os.ReadFile("testdata/stream.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/stream.golden")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		in         string
		wantFailed bool
		want       string
	}{
		{"a failed subtest fails the run and prints its output", string(in), true, string(want)},
		{"all pass", `{"Action":"pass","Package":"p","Test":"TestA","Elapsed":1}` + "\n" +
			`{"Action":"output","Package":"p","Output":"ok  \tp\t1.0s\n"}` + "\n" + `{"Action":"pass","Package":"p"}` + "\n",
			false, "--- PASS: TestA (1.00s)\nok  \tp\t1.0s\n"},
		{"build failure", `{"ImportPath":"p.test","Action":"build-output","Output":"x.go:1: undefined: y\n"}` + "\n" +
			`{"ImportPath":"p.test","Action":"build-fail"}` + "\n", true, "x.go:1: undefined: y\n"},
		{"a package failing outside tests", `{"Action":"output","Package":"p","Output":"panic: boom\n"}` + "\n" +
			`{"Action":"fail","Package":"p"}` + "\n", true, "panic: boom\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			failed, err := filter(strings.NewReader(tc.in), &out)
			if err != nil || failed != tc.wantFailed || out.String() != tc.want {
				t.Errorf("failed %v (want %v), err %v, output\n%s\nwant\n%s", failed, tc.wantFailed, err, out.String(), tc.want)
			}
		})
	}
}
