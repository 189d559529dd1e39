//go:build !linux

package residency

import "errors"

// DropExecutablePages does nothing outside Linux.
func DropExecutablePages() (Dropped, error) {
	return Dropped{PageByPage: errors.New("not Linux")}, nil
}
