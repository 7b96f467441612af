//go:build tools

// Package deps pins module dependencies before their users exist.
package deps

import (
	_ "github.com/apache/arrow-go/v18/arrow/ipc"
	_ "github.com/blevesearch/bleve/v2"
	_ "github.com/gomlx/gomlx/backends/simplego"
	_ "github.com/gomlx/gomlx/pkg/core/graph"
	_ "github.com/mattn/go-sqlite3"
	_ "github.com/schollz/progressbar/v3"
	_ "github.com/spf13/cobra"
	_ "golang.org/x/text/unicode/norm"
)
