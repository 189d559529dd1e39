// Package deps holds the dependency test: the import rules of the design
// brief (../shared/design/brief.md §2) as a table, checked against the
// packages `go list` reports. It has no code of its own.
package deps
