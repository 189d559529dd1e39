package servercmd

import (
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/server"
)

// The cap of live log campaigns per requester (issue 27, point 5):
// default, set by flag, environment or file, refused when not positive.
func TestMaxLogCampaignsPerRequester(t *testing.T) {
	cfg, err := loadConfig([]string{"-k", "-x", writeFile(t, "")}, env(nil))
	if err != nil || cfg.MaxLogCampaignsPerRequester != server.DefaultMaxLogCampaignsPerRequester || server.DefaultMaxLogCampaignsPerRequester != 32 {
		t.Fatalf("default: %d, %v", cfg.MaxLogCampaignsPerRequester, err)
	}
	for _, c := range []struct {
		args []string
		env  map[string]string
		want int
	}{
		{[]string{"-k", "-x", writeFile(t, ""), "--max-log-campaigns-per-requester", "5"}, nil, 5},
		{[]string{"-k", "-x", writeFile(t, "")}, map[string]string{"GRAPNEL_SERVER_MAX_LOG_CAMPAIGNS_PER_REQUESTER": "6"}, 6},
		{[]string{"-k", "-x", writeFile(t, "max_log_campaigns_per_requester: 7\n")}, nil, 7},
	} {
		cfg, err := loadConfig(c.args, env(c.env))
		if err != nil || cfg.MaxLogCampaignsPerRequester != c.want {
			t.Errorf("%v %v: %d, %v; want %d", c.args[3:], c.env, cfg.MaxLogCampaignsPerRequester, err, c.want)
		}
	}
	if _, err := loadConfig([]string{"-k", "-x", writeFile(t, ""), "--max-log-campaigns-per-requester", "0"}, env(nil)); err == nil ||
		!strings.Contains(err.Error(), "--max-log-campaigns-per-requester 0: must be positive") {
		t.Fatalf("a zero cap: %v", err)
	}
}
