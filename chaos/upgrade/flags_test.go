package upgrade

import (
	"reflect"
	"testing"
)

const serverHelp = `Usage of grapnel-server:
  -x, --server-config string                        server config file
  -a, --address string                              gRPC address (default "127.0.0.1:25551")
      --name string                                 replica id
      --max-locks int                               intent locks the cluster holds (default 10000)
  -k, --insecure                                    serve without TLS (development only)
`

// The flags of a --help text, long and short; a flag the binary lacks is
// named before it is ever started with it.
func TestHelpFlagsAndUnknown(t *testing.T) {
	f := Flags(ParseHelpFlags(serverHelp))
	for _, want := range []string{"-x", "--server-config", "-a", "--address", "--name", "--max-locks", "-k", "--insecure"} {
		if !f[want] {
			t.Errorf("%s missing from %v", want, f)
		}
	}
	got := f.Unknown([]string{"--name", "r1", "-a", "127.0.0.1:1", "-k", "--max-locks=5", "--max-streams", "4", "--hello-timeout", "-1", "-zq"})
	if want := []string{"--max-streams", "--hello-timeout", "-z"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("unknown %v, want %v", got, want)
	}
}

// The previous release is one commit hash; anything else is refused with
// the file and line.
func TestParsePreviousRelease(t *testing.T) {
	c, err := ParsePreviousRelease("f", []byte("# the previous release\n50f62c34ea60864e55b9e558cb65257da179397c\n"))
	if err != nil || c != "50f62c34ea60864e55b9e558cb65257da179397c" {
		t.Fatalf("%q %v", c, err)
	}
	for _, bad := range []string{"", "# only a comment\n", "main\n", "50f62c3\n50f62c4\n", "50F62C3\n"} {
		if _, err := ParsePreviousRelease("f", []byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The tracked file names a commit of this repository's history.
func TestPreviousReleaseFileIsTracked(t *testing.T) {
	c, err := ReadPreviousRelease("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(c) != 40 {
		t.Fatalf("%s holds %q: keep the full hash", PreviousReleaseFile, c)
	}
}

// Log levels of both log formats the processes write.
func TestLogLevel(t *testing.T) {
	for line, want := range map[string]string{
		`time=2026-11-28T12:14:23.081Z level=WARN msg="permission denied"`:            "warn",
		`time=2026-11-28T12:14:23.081Z level=ERROR msg="apply failed"`:                "error",
		`2026-11-28T12:19:12.702Z [ERROR] r1.raft: failed to restore snapshot`:        "error",
		`2026-11-28T12:14:23.109Z [WARN]  s1.raft: heartbeat timeout reached`:         "warn",
		`panic: runtime error: index out of range`:                                    "error",
		`time=2026-11-28T12:14:23.109Z level=INFO msg="grapnel-server started" id=s1`: "",
	} {
		if got := LogLevel(line); got != want {
			t.Errorf("%q: %q, want %q", line, got, want)
		}
	}
}
