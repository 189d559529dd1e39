//go:build !linux

package residency

// DropExecutablePages does nothing outside Linux.
func DropExecutablePages() (int, error) { return 0, nil }
