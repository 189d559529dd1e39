package state

// sizeOverhead is what each string, list, map or field adds to the
// encoded size beyond its text: protobuf spends a tag and a length on
// each (2 to 6 bytes), JSON quotes and separators. Sizes here bound the
// messages that carry the state, so they count generously.
const sizeOverhead = 8

// Size is the encoded size of a workload, counted as the budgets count
// it: every string with its overhead. It is deterministic and cheap (no
// encoding).
func (w *Workload) Size() int {
	if w == nil {
		return 0
	}
	n := 10*sizeOverhead + len(w.Agent) + len(w.RestartPolicy) + len(w.Runtime) + len(w.RuntimeConfig)
	for k, v := range w.Dependencies {
		n += 2*sizeOverhead + len(k) + len(v)
	}
	for k, v := range w.Tags {
		n += 2*sizeOverhead + len(k) + len(v)
	}
	for k, v := range w.Configs {
		n += 2*sizeOverhead + len(k) + len(v)
	}
	for _, f := range w.Files {
		n += 3*sizeOverhead + len(f.MountPoint) + len(f.Content)
	}
	for _, rs := range [][]AccessRule{w.ControlInterfaceAccess.AllowRules, w.ControlInterfaceAccess.DenyRules} {
		for _, r := range rs {
			n += 2*sizeOverhead + len(r.Operation)
			for _, m := range r.FilterMasks {
				n += sizeOverhead + len(m)
			}
			for _, m := range r.WorkloadNames {
				n += sizeOverhead + len(m)
			}
		}
	}
	return n
}

// ConfigSize is the encoded size of a config item, counted as Size counts.
func ConfigSize(v any) int {
	n := sizeOverhead
	switch x := v.(type) {
	case string:
		n += len(x)
	case []any:
		for _, e := range x {
			n += ConfigSize(e)
		}
	case map[string]any:
		for k, e := range x {
			n += len(k) + ConfigSize(e)
		}
	}
	return n
}
