package render

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
)

// swdd~config-renderer-renders-workload-configuration~2: the instance id is
// the hash of the rendered runtimeConfig, so it follows the values a
// workload uses and nothing else.
func TestInstanceIDFollowsReferencedConfig(t *testing.T) {
	w := &state.Workload{
		Agent:         "{{node.name}}",
		RuntimeConfig: "image: {{app.image}}\nenv: [{{#each app.env}}{{@key}}={{this}},{{/each}}]",
		Configs:       map[string]string{"node": "node", "app": "app"},
	}
	base := func() map[string]any {
		return map[string]any{
			"node":   map[string]any{"name": "agent_A", "unused": "1"},
			"app":    map[string]any{"image": "busybox:1.36", "env": map[string]any{"B": "2", "A": "1", "C": "3"}},
			"other":  "not referenced",
			"other2": []any{"x"},
		}
	}
	r := New()
	_, ref, err := r.Workload("wl", w, base())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		change  func(c map[string]any)
		changes bool
	}{
		{"nothing changes", func(map[string]any) {}, false},
		{"unreferenced config item changes", func(c map[string]any) { c["other"] = "changed" }, false},
		{"unused key of a referenced item changes", func(c map[string]any) { c["node"].(map[string]any)["unused"] = "2" }, false},
		{"map order is irrelevant", func(c map[string]any) {
			c["app"].(map[string]any)["env"] = map[string]any{"C": "3", "A": "1", "B": "2"}
		}, false},
		{"referenced value changes", func(c map[string]any) { c["app"].(map[string]any)["image"] = "busybox:1.37" }, true},
		{"referenced map entry changes", func(c map[string]any) { c["app"].(map[string]any)["env"].(map[string]any)["A"] = "9" }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.change(c)
			for i := 0; i < 5; i++ {
				_, inst, err := r.Workload("wl", w, c)
				if err != nil {
					t.Fatal(err)
				}
				if (inst.ID != ref.ID) != tc.changes {
					t.Fatalf("id changed = %v, want %v (%s vs %s)", inst.ID != ref.ID, tc.changes, inst.ID, ref.ID)
				}
				if inst.AgentName != "agent_A" || inst.WorkloadName != "wl" {
					t.Fatalf("instance name = %v", inst)
				}
			}
		})
	}
	t.Run("agent is rendered into the instance name", func(t *testing.T) {
		c := base()
		c["node"] = map[string]any{"name": "agent_B"}
		_, inst, err := r.Workload("wl", w, c)
		if err != nil {
			t.Fatal(err)
		}
		if inst.AgentName != "agent_B" || inst.ID != ref.ID {
			t.Errorf("instance name = %v, want agent_B with id %s", inst, ref.ID)
		}
	})
}

// The renderer is shared by the server's goroutines; run with -race.
func TestConcurrentUse(t *testing.T) {
	r := New()
	configs := testConfigs()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				w := testWorkload()
				// Some templates are shared by all goroutines, some are new.
				w.Files[0].Content = fmt.Sprintf("{{ref1.config_file}} %d", (g*50+i)%7)
				got, _, err := r.Workload("wl", w, configs)
				if err != nil {
					errs <- err
					return
				}
				if want := fmt.Sprintf("some config %d", (g*50+i)%7); got.Files[0].Content != want || got.Agent != "agent_A" {
					errs <- fmt.Errorf("got %q / %q, want %q / agent_A", got.Files[0].Content, got.Agent, want)
					return
				}
				if _, _, err := r.Workload("wl", &state.Workload{RuntimeConfig: "{{ref1.nope}}", Configs: w.Configs}, configs); err == nil {
					errs <- fmt.Errorf("missing value rendered without error")
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// raymond's parser abandons its lexer goroutine on a syntax error. Such
// templates must be refused before they reach it, so rendering many of
// them leaves no goroutines behind.
func TestSyntaxErrorsLeakNoGoroutines(t *testing.T) {
	r := New()
	before := runtime.NumGoroutine()
	for i := 0; i < 200; i++ {
		for _, bad := range []string{
			"{{/if}} tail %d {{x}}",
			"{{#if x}}{{/each}} %d {{y}}",
			"{{#each}} %d {{z}}{{/each}}",
			"{{a b=}} %d {{c}}",
			"{{#if x}}{{else}}{{else}}{{/if}} %d",
			"{{> (x) %d}}{{y}}",
		} {
			w := &state.Workload{RuntimeConfig: fmt.Sprintf(bad, i), Configs: map[string]string{"x": "k"}}
			if _, _, err := r.Workload("wl", w, map[string]any{"k": "v"}); err == nil {
				t.Fatalf("%q rendered without error", w.RuntimeConfig)
			}
		}
	}
	testwait.For(t, 2*time.Second, func() bool { return runtime.NumGoroutine() <= before+5 },
		"the goroutines back to at most %d (there are %v)", before+5, testwait.Lazy(func() string { return fmt.Sprint(runtime.NumGoroutine()) }))
}

// swdd~server-state-triggers-configuration-rendering-of-workloads~1:
// rendering runs on every state update, so a template is parsed once and
// then served from a cache that stays bounded.
func TestTemplateCache(t *testing.T) {
	r := New()
	w := testWorkload()
	for i := 0; i < 3; i++ {
		if _, _, err := r.Workload("wl", w, testConfigs()); err != nil {
			t.Fatal(err)
		}
	}
	// agent, runtimeConfig and two files: four templates.
	if n := r.cache.len(); n != 4 {
		t.Errorf("cache holds %d templates, want 4", n)
	}
	if _, _, err := r.Workload("wl", &state.Workload{RuntimeConfig: "no template", Configs: w.Configs}, testConfigs()); err != nil {
		t.Fatal(err)
	}
	if n := r.cache.len(); n != 4 {
		t.Errorf("text without a template was cached: %d entries", n)
	}

	c := newCache()
	for i := 0; i < maxCacheEntries+100; i++ {
		src := fmt.Sprintf("{{x}}%d", i)
		c.put(src, cacheEntry{})
	}
	if n := c.len(); n > maxCacheEntries {
		t.Errorf("cache holds %d entries, more than %d", n, maxCacheEntries)
	}
	big := make([]byte, maxCacheBytes/32)
	for i := range big {
		big[i] = 'a'
	}
	for i := 0; i < 64; i++ {
		c.put(fmt.Sprintf("%d%s", i, big), cacheEntry{})
	}
	if c.bytes > maxCacheBytes {
		t.Errorf("cache holds %d bytes, more than %d", c.bytes, maxCacheBytes)
	}
}

func TestWorkloadNil(t *testing.T) {
	_, _, err := New().Workload("wl", nil, nil)
	if fe := fieldError(t, err); fe.Path != "desiredState.workloads.wl" {
		t.Errorf("path = %q", fe.Path)
	}
}
