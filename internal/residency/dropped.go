package residency

// Dropped is what DropExecutablePages did.
type Dropped struct {
	// Bytes is the span of the executable's read-only mappings that left
	// the resident set.
	Bytes int
	// PageByPage is nil when the kernel brings those pages back one at a
	// time, as the process runs them again, and otherwise says why it
	// still maps each one's neighbours with it (fault-around, 64 KiB by
	// default: an idle replica then holds about three times the code it
	// runs; docs/operations.md, "RSS").
	PageByPage error
}

// FaultAround says, for a log line, whether the kernel still maps the
// neighbours of a page that comes back, and why.
func (d Dropped) FaultAround() string {
	if d.PageByPage == nil {
		return "off"
	}
	return "on: " + d.PageByPage.Error()
}
