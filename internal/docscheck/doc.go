// Package docscheck holds the tests that keep the docs and comments true.
// Every file, directory, package symbol, method and mixed-case name that
// the Markdown documents or the Go comments name in code spans must exist
// in the tree (or be listed as another project's), and so must every
// test, benchmark and fuzz target they name and every file a comment
// names outside a code span. Every package written by hand has exactly
// one package doc, a library's starting "Package NAME" (as Tailscale's
// pkgdoc_test.go checks), and docs/architecture.md's package table names
// every package and each package's imports of ours. A doc or comment
// that names a file or function that was renamed or removed fails
// `make test`.
package docscheck
