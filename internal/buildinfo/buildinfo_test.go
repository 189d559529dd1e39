package buildinfo

import (
	"errors"
	"os"
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

// Requirement (issue 28, point 1): the release is the file VERSION at the
// repository's root; `make build` passes it with -X, and a plain go build
// (the end-to-end tests', the benchmarks') gets the default, so the two
// must agree.
func TestVersionFileMatchesDefault(t *testing.T) {
	data, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	file := strings.TrimSpace(string(data))
	if file != Version {
		t.Fatalf("VERSION holds %q, buildinfo.Version's default is %q: change both", file, Version)
	}
	if string(data) != file+"\n" {
		t.Fatalf("VERSION must be the release and one newline, got %q", data)
	}
}

// Requirement (issue 28, point 1): the release is a semantic version.
func TestReleaseIsSemver(t *testing.T) {
	if err := CheckRelease(Version); err != nil {
		t.Fatalf("buildinfo.Version: %v", err)
	}
	for _, ok := range []string{"0.4.0", "0.4.0-dev", "1.2.3-rc.1", "1.0.0-alpha.beta.1+build.5", "10.20.30", "1.0.0+20130313144700"} {
		if err := CheckRelease(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "1", "1.2", "v1.2.3", "01.2.3", "1.2.3-", "1.2.3-01", "1.2.3+", "1.2.3 ", "1.2.3\n", "1.2.3-a..b",
		"1.2.3-" + strings.Repeat("x", MaxReleaseBytes)} {
		err := CheckRelease(bad)
		if !errors.Is(err, ErrBadRelease) {
			t.Errorf("%q accepted (%v)", bad, err)
		}
	}
}
