package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestDescribe(t *testing.T) {
	stamped := func(kv ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{}
		for i := 0; i+1 < len(kv); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return info
	}
	tests := []struct {
		name     string
		info     *debug.BuildInfo
		ok       bool
		ldCommit string
		protocol string
		want     string
	}{
		{"stamped", stamped("vcs.revision", "0123456789abcdef0123", "vcs.modified", "false"), true, "", "1.0.0",
			"9.9.9 (ankaios protocol v1.0, commit 0123456789ab)"},
		{"stamped, dirty", stamped("vcs.revision", "abc1234", "vcs.modified", "true"), true, "", "1.0.0",
			"9.9.9 (ankaios protocol v1.0, commit abc1234-dirty)"},
		{"stamp wins over -X", stamped("vcs.revision", "abc1234"), true, "fromld", "1.2.3",
			"9.9.9 (ankaios protocol v1.2, commit abc1234)"},
		{"no stamp, -X", stamped(), true, "fromld", "1.0.0", "9.9.9 (ankaios protocol v1.0, commit fromld)"},
		{"no build info", nil, false, "", "1.0.0", "9.9.9 (ankaios protocol v1.0, commit unknown)"},
		{"odd protocol", nil, false, "", "2", "9.9.9 (ankaios protocol v2, commit unknown)"},
	}
	defer func(v, c string) { Version, Commit = v, c }(Version, Commit)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			Version, Commit = "9.9.9", tt.ldCommit
			if got := describe(tt.protocol, tt.info, tt.ok); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLine(t *testing.T) {
	got := Line("grapnel", "1.0.0")
	if !strings.HasPrefix(got, "grapnel "+Version+" (ankaios protocol v1.0, commit ") || !strings.HasSuffix(got, ")") {
		t.Fatalf("got %q", got)
	}
}
