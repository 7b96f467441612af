// Package version holds the ragforge version recorded with every run.
package version

// Version is overridden at build time with
// -ldflags "-X github.com/ragforge/ragforge/internal/version.Version=...".
var Version = "0.1.0-dev"
