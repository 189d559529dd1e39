package servercmd

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/internal/testwait"
)

// The dashboard in a real browser: three grapnel-server processes serve
// it (--ui-address), one agent runs process workloads, and headless
// Chromium, driven over the DevTools protocol (chromedp), loads the
// leader's dashboard. The page must name the leader and show the
// workloads in their states, open a workload's detail with its rendered
// config and timeline, then, once the leader is SIGKILLed, move on its own
// to a surviving replica's dashboard and show the new leader. A
// screenshot is saved under .bench/ (path in the test log).

// chromiumPath finds Debian's chromium (or another Chromium or Chrome).
func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

const dashboardManifest = `apiVersion: v1
workloads:
  sleeper:
    runtime: process
    agent: agent_A
    runtimeConfig: |
      command: /bin/sleep
      args: ["3600"]
  waiter:
    runtime: process
    agent: agent_A
    dependencies:
      sleeper: ADD_COND_RUNNING
    runtimeConfig: |
      command: /bin/sleep
      args: ["3601"]
  oneshot:
    runtime: process
    agent: agent_A
    restartPolicy: NEVER
    runtimeConfig: |
      command: /bin/true
  broken:
    runtime: no-such-runtime
    agent: agent_A
    runtimeConfig: ""
`

// dashboardLate is applied while the page is open: it must appear
// without a reload, and its logs reach the page.
const dashboardLate = `apiVersion: v1
workloads:
  talker:
    runtime: process
    agent: agent_A
    runtimeConfig: |
      command: /bin/sh
      args: ["-c", "echo hello-from-talker; exec sleep 3600"]
`

func TestDashboardInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: builds the binaries, runs three replicas, an agent and headless Chromium")
	}
	chromium := chromiumPath()
	if chromium == "" && os.Getenv("GRAPNEL_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("chromium is not installed (GRAPNEL_REQUIRE_CHROMIUM=1): apt-get install -y chromium")
	}
	if chromium == "" {
		t.Skip("chromium is not installed (apt-get install -y chromium); the dashboard's browser test needs it")
	}
	bins := e2eBuild(t, "grapnel-server", "grapnel", "grapnel-agent")
	dir := t.TempDir()
	g := e2eGrapnel(t, bench.GrapnelConfig{Bin: bins["grapnel-server"], Dir: dir, Replicas: 3, UI: true}, 30)
	var agent *bench.Agent
	t.Cleanup(func() {
		if agent != nil {
			agent.Kill()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	leader, err := g.WaitHealthy(wctx)
	wcancel()
	if err != nil {
		t.Fatal(err)
	}
	agent, err = bench.StartAgent(bench.AgentConfig{Bin: bins["grapnel-agent"], Dir: dir, Name: "agent_A", Servers: g.Addrs(), Runtimes: []string{"process"}})
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(dir, "dashboard.yaml")
	if err := os.WriteFile(manifest, []byte(dashboardManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	e2eCLI(t, bins["grapnel"], g.Addrs(), "apply", manifest)
	// Workloads outlive their agent by design: delete them before it
	// stops (cleanups run last registered first).
	t.Cleanup(func() {
		cmd := exec.Command(bins["grapnel"], "-k", "--server-url", strings.Join(g.Addrs(), ","), "delete", "workload", "sleeper", "waiter", "oneshot", "talker")
		_ = cmd.Run()
	})

	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 1400))...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	// The first Run starts the browser and binds it to its context: the
	// test-long one, not a per-call timeout's.
	if _, err := chromedp.Run(browser, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium %s: %v", chromium, err)
	}
	var lastJSErr error
	// js evaluates an expression in the page; a failed evaluation (the
	// page is navigating) reads as the zero value.
	js := func(expr string) string {
		c, cancel := context.WithTimeout(browser, 3*time.Second)
		defer cancel()
		out, err := chromedp.Run(c, chromedp.Evaluate[string](expr))
		if err != nil {
			lastJSErr = err
			return ""
		}
		return out
	}
	text := func(id string) string {
		return js(fmt.Sprintf(`(document.getElementById(%q) || {textContent: ""}).textContent`, id))
	}
	stateOf := func(w string) string {
		return js(fmt.Sprintf(`(document.querySelector('tr[data-workload=%q] td.state') || {textContent: ""}).textContent`, w))
	}

	// A young cluster may still change its leader: load the dashboard of
	// the replica that leads and wait until the page agrees it leads.
	var leaderName string
	testwait.For(t, 30*time.Second, func() bool {
		wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
		defer wcancel()
		if leader, err = g.WaitLeader(wctx); err != nil {
			return false
		}
		leaderName = g.Replicas[leader].Name
		if text("replica") != leaderName {
			url := "http://" + g.Replicas[leader].UIAddr + "/"
			if _, err := chromedp.Run(browser, chromedp.Navigate(url)); err != nil {
				t.Logf("load %s: %v", url, err)
				return false
			}
		}
		// A page loaded before the election may show the old view for a
		// moment; load it again if it does not catch up.
		return testwait.Until(2*time.Second, func() bool {
			return text("leader") == leaderName && text("replica") == leaderName && text("conn") == "live"
		})
	}, "the leader's dashboard names it the leader")
	testwait.For(t, 20*time.Second, func() bool {
		return strings.HasPrefix(stateOf("sleeper"), "Running") && strings.HasPrefix(stateOf("waiter"), "Running") &&
			strings.HasPrefix(stateOf("oneshot"), "Succeeded")
	}, "sleeper and waiter Running, oneshot Succeeded on the page (live, without a reload)")
	// A workload that cannot start is drawn as a failure, not as one
	// that waits (issue 31 point 5).
	testwait.For(t, 20*time.Second, func() bool {
		return stateOf("broken") == "Pending(StartingFailed)" &&
			js(`String(document.querySelector('tr[data-workload="broken"] td.state').classList.contains('bad'))`) == "true"
	}, "broken shown Pending(StartingFailed) and marked bad (shows %q)", testwait.Lazy(func() string { return stateOf("broken") }))
	// A change while the page is open reaches it over its events stream.
	late := filepath.Join(dir, "late.yaml")
	if err := os.WriteFile(late, []byte(dashboardLate), 0o644); err != nil {
		t.Fatal(err)
	}
	e2eCLI(t, bins["grapnel"], g.Addrs(), "apply", late)
	testwait.For(t, 20*time.Second, func() bool { return strings.HasPrefix(stateOf("talker"), "Running") },
		"talker, applied while the page is open, shows Running without a reload")
	if n := js(`String(document.querySelectorAll('#replicas tbody tr').length)`); n != "3" {
		t.Fatalf("the replicas table has %s rows, want 3", n)
	}
	if a := js(`(document.querySelector('tr[data-agent="agent_A"]') || {textContent: ""}).textContent`); !strings.Contains(a, "connected") {
		t.Fatalf("agent row %q: want agent_A connected", a)
	}
	// The agent's load lives in the leader's memory only; the page shows
	// it (issue 31 point 5), here and after the failover below.
	agentLoad := func() (string, string) {
		return js(`(document.querySelector('tr[data-agent="agent_A"] td.cpu') || {textContent: ""}).textContent`),
			js(`(document.querySelector('tr[data-agent="agent_A"] td.mem') || {textContent: ""}).textContent`)
	}
	loadShown := func() bool {
		cpu, mem := agentLoad()
		return strings.HasSuffix(cpu, " %") && strings.HasSuffix(mem, " MiB")
	}
	testwait.For(t, 20*time.Second, loadShown, "agent_A's CPU and free memory on the page, not —")
	// The filter narrows the workloads table.
	js(`(() => { const f = document.getElementById('filter'); f.value = 'oneshot'; f.dispatchEvent(new Event('input')); return ''; })()`)
	if n := js(`String(document.querySelectorAll('#workloads tbody tr').length)`); n != "1" {
		t.Fatalf("filter 'oneshot' leaves %s rows, want 1", n)
	}
	js(`(() => { const f = document.getElementById('filter'); f.value = ''; f.dispatchEvent(new Event('input')); return ''; })()`)
	// A workload's detail: rendered config and timeline.
	js(`(() => { document.querySelector('tr[data-workload="waiter"]').click(); return ''; })()`)
	testwait.For(t, 10*time.Second, func() bool {
		return strings.Contains(text("dconfig"), "/bin/sleep") && js(`String(document.querySelectorAll('#dtimeline tbody tr').length > 0)`) == "true"
	}, "the detail of waiter with its rendered config and timeline")
	// Logs: a log campaign through the replica, as `grapnel logs` runs.
	js(`(() => { location.hash = '#/w/talker'; return ''; })()`)
	testwait.For(t, 10*time.Second, func() bool { return text("dname") == "talker" }, "the detail of talker")
	js(`(() => { document.getElementById('logbtn').click(); return ''; })()`)
	testwait.For(t, 15*time.Second, func() bool { return strings.Contains(text("dlogs"), "hello-from-talker") },
		"talker's log line on the page (logs: %q)", text("dlogs"))
	js(`(() => { document.getElementById('logbtn').click(); location.hash = '#/w/waiter'; return ''; })()`)
	testwait.For(t, 10*time.Second, func() bool { return text("dname") == "waiter" }, "the detail of waiter again")
	if svg := js(`String(document.getElementById('graph').naturalWidth > 0)`); svg != "true" {
		t.Fatalf("the dependency graph image did not load")
	}

	defer func() {
		if t.Failed() {
			t.Logf("page at %s: replica %q leader %q conn %q replicas %q", js(`location.href`), text("replica"), text("leader"), text("conn"),
				js(`document.getElementById('replicas').innerText`))
			t.Logf("last evaluation error: %v; moving: %q", lastJSErr, js(`document.body.dataset.move || ''`))
		}
	}()
	g.Kill(leader)
	t.Logf("killed leader %s", leaderName)
	testwait.For(t, 30*time.Second, func() bool {
		r, l := text("replica"), text("leader")
		return r != "" && r != leaderName && l != "" && l != leaderName && l != "none" && text("conn") == "live"
	}, "the page moves to a surviving replica and shows the new leader")
	wctx, wcancel = context.WithTimeout(ctx, 10*time.Second)
	next, err := g.WaitLeader(wctx)
	wcancel()
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, func() bool { return text("leader") == g.Replicas[next].Name }, "the page names leader %s", g.Replicas[next].Name)
	if !strings.HasPrefix(stateOf("sleeper"), "Running") {
		t.Fatalf("after the failover sleeper shows %q, want Running", stateOf("sleeper"))
	}
	testwait.For(t, 20*time.Second, loadShown, "agent_A's load on replica %s's page after the failover", text("replica"))
	// The killed replica is down, and 2 of 3 voters are exactly a
	// quorum: the problems panel says both (issue 31 point 4).
	problemRow := func(kind string) string {
		return js(fmt.Sprintf(`[...document.querySelectorAll('#problems tbody tr')].map((r) => r.textContent).filter((s) => s.includes(%q)).join('|')`, kind))
	}
	testwait.For(t, 30*time.Second, func() bool {
		return strings.Contains(problemRow("ReplicaDown"), leaderName) && problemRow("QuorumAtRisk") != ""
	}, "ReplicaDown %s and QuorumAtRisk in the problems panel (%q)", leaderName, testwait.Lazy(func() string { return js(`document.getElementById('problems').innerText`) }))
	shot, err := chromedp.Run(browser, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := screenshotPath(t)
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("the page moved from %s to %s, which shows leader %s; screenshot: %s", leaderName, text("replica"), text("leader"), path)
}

// screenshotPath is .bench/dashboard.png at the module root, or the
// test's temp dir when that cannot be made.
func screenshotPath(t *testing.T) string {
	// The repository's .bench/ (ignored by git): the test runs in
	// cmd/internal/servercmd.
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if _, serr := os.Stat(filepath.Join(root, "go.mod")); err == nil && serr == nil {
		dir := filepath.Join(root, ".bench")
		if os.MkdirAll(dir, 0o755) == nil {
			return filepath.Join(dir, "dashboard.png")
		}
	}
	return filepath.Join(t.TempDir(), "dashboard.png")
}
