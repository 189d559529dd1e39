//go:build unix

package render

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/state"
)

// budgetShape is a workload meant to cost as much time per render step
// as a template can: the shapes of BenchmarkRenderBudgetShapes.
type budgetShape struct {
	name    string
	src     string
	configs map[string]any
}

func listOf(n int, f func(i int) any) []any {
	l := make([]any, n)
	for i := range l {
		l[i] = f(i)
	}
	return l
}

func mapOf(n int) map[string]any {
	m := make(map[string]any, n)
	for i := range n {
		m[fmt.Sprintf("k%04d", i)] = "v"
	}
	return m
}

// renderShapes are templates that each take close to maxSteps steps to
// check: nested loops over lists and maps, @-variables, lookups through
// the deepest context stack, long paths and block parameters.
func renderShapes() []budgetShape {
	str := func(int) any { return "x" }
	deep := any("leaf")
	path := "c.d"
	for range 30 {
		deep = map[string]any{"a": deep}
		path += ".a"
	}
	withs := strings.Repeat("{{#with c.m}}", 62)
	endWiths := strings.Repeat("{{/with}}", 62)
	params := ""
	for i := range 60 {
		params += fmt.Sprintf("{{#each c.one as |p%d|}}", i)
	}
	return []budgetShape{
		{"nested-each-list", "{{#each c.l}}{{#each ../c.l}}x{{/each}}{{/each}}", map[string]any{"l": listOf(350, str)}},
		{"nested-each-map", "{{#each c.m}}{{#each ../c.m}}x{{/each}}{{/each}}", map[string]any{"m": mapOf(240)}},
		{"each-variables", "{{#each c.l}}{{@index}}{{@first}}{{@last}}{{/each}}", map[string]any{"l": listOf(30000, str)}},
		{"lookup-through-contexts", withs + "{{#each c.l}}{{c.v}}{{/each}}" + endWiths, map[string]any{"m": map[string]any{"k": "v"}, "l": listOf(1800, str), "v": "x"}},
		{"long-path", "{{#each c.l}}{{" + path + "}}{{/each}}", map[string]any{"l": listOf(7000, str), "d": deep}},
		{"block-parameters", params + "{{#each c.l}}{{p0}}{{/each}}" + strings.Repeat("{{/each}}", 60), map[string]any{"one": []any{"x"}, "l": listOf(3500, str)}},
	}
}

// compileShapes are template texts whose parsing costs raymond the most
// per byte: dense tags, many parameters, long names, plain text, index
// segments that each take a pass, comments.
func compileShapes(size int) []budgetShape {
	fill := func(unit string) string { return strings.Repeat(unit, size/len(unit)) }
	return []budgetShape{
		{"parse-dense-tags", fill("{{c.a}} "), nil},
		{"parse-parameters", "{{lookup c" + fill(" a") + "}}", nil},
		{"parse-long-names", fill("{{c.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}}"), nil},
		{"parse-plain-text", fill("x") + "{{c.a}}", nil},
		{"parse-index-passes", fill("x") + strings.Repeat("{{c.l.0.a}}", maxIndexPasses), nil},
		{"parse-comments", fill("{{!-- c --}}"), nil},
		{"parse-block-pairs", fill("{{#if c}}{{/if}}"), nil},
	}
}

// BenchmarkRenderBudgetShapes measures the time one render step takes
// for the shapes that make it longest (ns/step, CPU time of the
// process): for the checks, the whole render (strict check and raymond)
// divided by the steps the Budget charged; for parsing, one compile of a
// new source divided by compileCost. The worst shape times the budget
// (max_render_steps_per_request) bounds how long rendering one request
// can take; docs/operations.md gives the figures.
func BenchmarkRenderBudgetShapes(b *testing.B) {
	for _, s := range renderShapes() {
		b.Run(s.name, func(b *testing.B) {
			w := &state.Workload{Agent: "agent_A", Runtime: "podman", Configs: map[string]string{"c": "c"}, RuntimeConfig: s.src}
			configs := map[string]any{"c": s.configs}
			r := New()
			steps := 0
			start := cpuTime()
			for b.Loop() {
				budget := NewBudget(0, 0)
				if _, _, err := r.WorkloadWithin("w", w, configs, budget); err != nil {
					b.Fatal(err)
				}
				steps = budget.Steps() - compileCost(s.src) // parsed once, then cached
			}
			reportPerStep(b, steps, start)
		})
	}
	for _, size := range []int{16 << 10, 256 << 10} {
		for _, s := range compileShapes(size) {
			b.Run(fmt.Sprintf("%s-%dKiB", s.name, size>>10), func(b *testing.B) {
				start := cpuTime()
				for i := 0; b.Loop(); i++ {
					_, _ = compile(fmt.Sprintf("%s%d", s.src, i)) // a new source each time
				}
				reportPerStep(b, compileCost(s.src), start)
			})
		}
	}
}

// reportPerStep reports the steps of one operation and the wall and CPU
// time per step; start is cpuTime before the loop.
func reportPerStep(b *testing.B, steps int, start time.Duration) {
	b.ReportMetric(float64(steps), "steps")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(steps), "ns/step")
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N)/float64(steps), "cpu-ns/step")
}

// cpuTime is the CPU time the process used so far, user and system: on
// a machine shared with other jobs it varies less than the wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
