// Command ragforge trains, labels, evaluates and serves the models behind
// medical retrieval-augmented generation (RAG² filter, SL-HyDE retriever).
package main

import "os"

func main() { os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr)) }
