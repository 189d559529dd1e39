// Package state is Grapnel's model of an Ankaios cluster: the desired state
// (workloads and configs), workload execution states and the agent map, and
// the pure operations on them: manifest parsing and validation, naming
// rules, field masks for reads, update masks for writes and the state
// comparator.
//
// The package is pure and deterministic. It does no I/O and reads neither
// the clock nor randomness, so the FSM can run it on every replica and get
// the same answer. It imports nothing else of Grapnel.
//
// Two representations exist side by side. The typed model (CompleteState,
// State, Workload, ...) is what the server and FSM work with. The Tree
// (nested map[string]any) is the YAML/JSON view in which field masks are
// defined; it can hold partial objects, which a filtered read returns.
package state
