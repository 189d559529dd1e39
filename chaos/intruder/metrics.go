package intruder

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
)

// metricsAttempts ask every replica for /metrics over the network
// (issue 27, hole 9): a replica runs --metrics-address :PORT, which is
// its loopback, so the port must not answer from another host. Any
// answer (a body, an HTTP status) counts as accepted.
func metricsAttempts(ctx context.Context, c Config) []Attempt {
	var out []Attempt
	for _, t := range c.Targets {
		a := Attempt{Target: t.Name, Channel: "metrics", What: "GET /metrics from another host (--metrics-address :PORT)"}
		if c.Bounds.MetricsPort <= 0 {
			a.Skipped = "no metrics port configured"
			out = append(out, a)
			continue
		}
		host, _, err := net.SplitHostPort(t.GRPC)
		if err != nil {
			a.Accepted, a.Detail = true, "could not try: "+err.Error()
			out = append(out, a)
			continue
		}
		a.Accepted, a.Detail = httpGet(ctx, "http://"+net.JoinHostPort(host, strconv.Itoa(c.Bounds.MetricsPort))+"/metrics")
		out = append(out, a)
	}
	return out
}

// httpGet fetches url; answered is whether anything came back.
func httpGet(ctx context.Context, url string) (answered bool, detail string) {
	code, detail, err := get(ctx, url)
	if err != nil {
		return false, err.Error()
	}
	return code != 0, detail
}

// HTTPGet fetches url and says whether it was served (200 with a body):
// the campaign's control that a replica serves its metrics on its own
// loopback, so that the refusal from another host means something.
func HTTPGet(ctx context.Context, url string) (ok bool, detail string) {
	code, detail, err := get(ctx, url)
	if err != nil {
		return false, err.Error()
	}
	return code == http.StatusOK, detail
}

// get fetches url within attemptTimeout.
func get(ctx context.Context, url string) (code int, detail string, err error) {
	cctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	n, _ := io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, fmt.Sprintf("%s answered %s with %d bytes", url, resp.Status, n), nil
}
