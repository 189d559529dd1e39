package shim

import "testing"

func TestParseStat(t *testing.T) {
	line := "4242 (we (ird) name) S 1 4240 4239 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100\n"
	st, err := ParseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if st != (Stat{State: 'S', PGID: 4240, Session: 4239, StartTime: 987654}) {
		t.Fatalf("parsed %+v", st)
	}
	if _, err := ParseStat([]byte("1 (x) S 1 2")); err == nil {
		t.Fatal("short line accepted")
	}
}
