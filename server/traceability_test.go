package server

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// exceptions are requirement ids no test names, each with the reason.
var exceptions = map[string]string{}

var idRE = regexp.MustCompile(`swdd~[a-z0-9-]+~[0-9]+`)

// TestTraceability fails when an approved requirement of the Ankaios
// server design is named by no test. The ids live in docs/swdd-ids.txt; when
// the seed document is present beside the repository the list is checked
// against it too.
func TestTraceability(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	ids := readIDs(t, filepath.Join(root, "docs", "swdd-ids.txt"))
	seed := filepath.Join(root, "..", "shared", "seeds", "000_d54db0b16eee6de9.txt")
	if data, err := os.ReadFile(seed); err == nil {
		fromSeed := map[string]bool{}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "`swdd~") {
				fromSeed[strings.Trim(line, "`")] = true
			}
		}
		for id := range fromSeed {
			if !ids[id] {
				t.Errorf("%s is in the seed but not in docs/swdd-ids.txt", id)
			}
		}
	} else {
		t.Logf("seed not found beside the repository; using docs/swdd-ids.txt only")
	}
	named := map[string]bool{}
	err := filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() && (info.Name() == ".git" || info.Name() == "bin") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(p, "_test.go") || strings.HasSuffix(p, "traceability_test.go") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, id := range idRE.FindAllString(string(data), -1) {
			named[id] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for id := range ids {
		if named[id] {
			continue
		}
		if why, ok := exceptions[id]; ok {
			t.Logf("exception %s: %s", id, why)
			continue
		}
		missing = append(missing, id)
	}
	sort.Strings(missing)
	for _, id := range missing {
		t.Errorf("no test names %s", id)
	}
	t.Logf("%d requirements, %d named by tests, %d exceptions", len(ids), len(ids)-len(missing), len(exceptions))
}

func readIDs(t *testing.T, path string) map[string]bool {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ids := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			ids[s] = true
		}
	}
	return ids
}
