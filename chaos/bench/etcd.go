package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// EtcdConfig says how to start the etcd peer cluster.
type EtcdConfig struct {
	// Bin is the etcd server binary, Load the etcdload client (both built
	// from chaos/etcdpeer).
	Bin, Load string
	// Dir holds one data directory and one log file per member.
	Dir     string
	Members int
}

// Etcd is a cluster of etcd members on loopback, plain HTTP, default
// timing (heartbeat 100 ms, election 1 s) and default fsync behaviour.
type Etcd struct {
	load    string
	members []*etcdMember
}

type etcdMember struct {
	name, clientURL, logPath string
	proc                     *Process
}

// StartEtcd starts the members as one new cluster; WaitHealthy waits for
// it to serve.
func StartEtcd(cfg EtcdConfig) (*Etcd, error) {
	if cfg.Members < 1 {
		return nil, fmt.Errorf("%w: etcd members %d: need at least 1", ErrBadConfig, cfg.Members)
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	addrs, err := FreeAddrs(2 * cfg.Members)
	if err != nil {
		return nil, err
	}
	var initial []string
	for i := range cfg.Members {
		initial = append(initial, fmt.Sprintf("e%d=http://%s", i+1, addrs[2*i+1]))
	}
	e := &Etcd{load: cfg.Load}
	for i := range cfg.Members {
		name := fmt.Sprintf("e%d", i+1)
		m := &etcdMember{name: name, clientURL: "http://" + addrs[2*i], logPath: filepath.Join(cfg.Dir, name+".log")}
		peer := "http://" + addrs[2*i+1]
		args := []string{
			"--name", name, "--data-dir", filepath.Join(cfg.Dir, name),
			"--listen-client-urls", m.clientURL, "--advertise-client-urls", m.clientURL,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "grapnel-bench", "--log-level", "warn",
		}
		m.proc, err = StartProcess(name, cfg.Bin, args, m.logPath)
		if err != nil {
			e.Close()
			return nil, err
		}
		e.members = append(e.members, m)
	}
	return e, nil
}

// Endpoints are the client URLs of all members.
func (e *Etcd) Endpoints() []string {
	out := make([]string, len(e.members))
	for i, m := range e.members {
		out[i] = m.clientURL
	}
	return out
}

// Pids are the members' process ids.
func (e *Etcd) Pids() []int {
	out := make([]int, len(e.members))
	for i, m := range e.members {
		out[i] = m.proc.Pid()
	}
	return out
}

// Close stops every member.
func (e *Etcd) Close() {
	for _, m := range e.members {
		m.proc.Stop(5 * time.Second)
	}
}

// WaitHealthy waits until every member answers /health with true, which
// etcd does only once the member sees a leader.
func (e *Etcd) WaitHealthy(ctx context.Context) error {
	hc := &http.Client{Timeout: statusTimeout}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	why := "not checked yet"
	for {
		healthy := 0
		for _, m := range e.members {
			if err := m.proc.ExitErr(); err != nil {
				return fmt.Errorf("%w\n%s", err, LogTail(m.logPath, 20))
			}
			ok, err := etcdHealth(ctx, hc, m.clientURL)
			switch {
			case err != nil:
				why = fmt.Sprintf("%s: %v", m.name, err)
			case !ok:
				why = m.name + " reports unhealthy"
			default:
				healthy++
			}
		}
		if healthy == len(e.members) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: etcd: %s (%v)", ErrNotReady, why, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

func etcdHealth(ctx context.Context, hc *http.Client, url string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
	if err != nil {
		return false, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	var h struct {
		Health string `json:"health"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&h); err != nil {
		return false, fmt.Errorf("/health: %w", err)
	}
	return h.Health == "true", nil
}

// Run runs the etcd load client with the same bounds as a Grapnel run and
// returns its sample.
func (e *Etcd) Run(ctx context.Context, cfg LoadConfig, payload int, timeout time.Duration) (Sample, error) {
	if err := cfg.check(); err != nil {
		return Sample{}, err
	}
	args := []string{
		"--endpoints", strings.Join(e.Endpoints(), ","),
		"--clients", strconv.Itoa(cfg.Clients), "--count", strconv.Itoa(cfg.Count),
		"--duration", cfg.Duration.String(), "--warmup", cfg.Warmup.String(),
		"--payload", strconv.Itoa(payload), "--timeout", timeout.String(),
	}
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, e.load, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return Sample{}, fmt.Errorf("etcdload %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	var s Sample
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		return Sample{}, fmt.Errorf("etcdload output: %w", err)
	}
	if s.System != "etcd" || s.Clients != cfg.Clients || s.Ops != len(s.LatenciesNs) {
		return Sample{}, fmt.Errorf("%w: etcdload reported system %q, %d clients, %d ops with %d latencies",
			ErrUnexpectedResponse, s.System, s.Clients, s.Ops, len(s.LatenciesNs))
	}
	return s, nil
}
