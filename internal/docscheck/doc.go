// Package docscheck holds the test that keeps docs/ true: every file,
// directory, package symbol and method the Markdown documents name in
// code spans or links must exist in the tree, and so must every test,
// benchmark and fuzz target they name. A doc that names a file or
// function that was renamed or removed fails `make test`.
package docscheck
