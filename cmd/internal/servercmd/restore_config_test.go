package servercmd

import (
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/server"
)

// The restore size cap: documented default, set by flag, environment or
// file, and refused when not positive.
func TestMaxRestoreBytes(t *testing.T) {
	cfg, err := loadConfig([]string{"-k", "-x", writeFile(t, "")}, env(nil))
	if err != nil || int64(cfg.MaxRestoreBytes) != server.DefaultMaxRestoreBytes || server.DefaultMaxRestoreBytes != 256<<20 {
		t.Fatalf("default: %d, %v", cfg.MaxRestoreBytes, err)
	}
	for _, c := range []struct {
		args []string
		env  map[string]string
		want int
	}{
		{[]string{"-k", "-x", writeFile(t, ""), "--max-restore-bytes", "1048576"}, nil, 1 << 20},
		{[]string{"-k", "-x", writeFile(t, "")}, map[string]string{"GRAPNEL_SERVER_MAX_RESTORE_BYTES": "4096"}, 4096},
		{[]string{"-k", "-x", writeFile(t, "max_restore_bytes: 8192\n")}, nil, 8192},
	} {
		cfg, err := loadConfig(c.args, env(c.env))
		if err != nil || cfg.MaxRestoreBytes != c.want {
			t.Errorf("%v %v: %d, %v; want %d", c.args[3:], c.env, cfg.MaxRestoreBytes, err, c.want)
		}
	}
	if _, err := loadConfig([]string{"-k", "-x", writeFile(t, ""), "--max-restore-bytes", "0"}, env(nil)); err == nil || !strings.Contains(err.Error(), "--max-restore-bytes 0: must be positive") {
		t.Fatalf("a zero cap: %v", err)
	}
}
