package docscheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// pkg is one directory's Go package as the checks below see it.
type pkg struct {
	dir       string   // relative to the repository's top
	name      string   // the package clause of its non-test files
	docs      []string // "file: first line" of each package doc
	generated bool     // every non-test file is generated
}

// packages returns every directory of the tree that holds a non-test Go
// package.
func packages(t *testing.T, r string) []pkg {
	t.Helper()
	byDir := map[string]*pkg{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(r, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != r && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules" || d.Name() == "bin") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil && p != r {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			return nil
		}
		dir, _ := filepath.Rel(r, filepath.Dir(p))
		dir = filepath.ToSlash(dir)
		k := byDir[dir]
		if k == nil {
			k = &pkg{dir: dir, name: f.Name.Name, generated: true}
			byDir[dir] = k
		}
		if !ast.IsGenerated(f) {
			k.generated = false
		}
		if f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "" { // a //go:debug line alone is no doc
			first, _, _ := strings.Cut(f.Doc.Text(), "\n")
			k.docs = append(k.docs, filepath.Base(p)+": "+first)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []pkg
	for _, k := range byDir {
		out = append(out, *k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].dir < out[j].dir })
	return out
}

// docProblem says what is wrong with a package's doc comments, or "": a
// package written by hand has exactly one, and a library's starts
// "Package NAME " (Tailscale's pkgdoc_test.go); a command's may start as
// it likes. Generated packages are the generator's.
func docProblem(k pkg) string {
	if k.generated {
		return ""
	}
	switch {
	case len(k.docs) == 0:
		return "has no package doc"
	case len(k.docs) > 1:
		return "has " + strings.Join(k.docs, " and ") + ": one package doc, in doc.go or the main file"
	}
	_, first, _ := strings.Cut(k.docs[0], ": ")
	if k.name != "main" && !strings.HasPrefix(first, "Package "+k.name+" ") {
		return "has the package doc " + k.docs[0] + `, which does not start "Package ` + k.name + ` "`
	}
	return ""
}

// Every package written by hand has exactly one package doc, and a
// library's names its package first.
func TestEveryPackageHasOneDoc(t *testing.T) {
	pkgs := packages(t, root(t))
	if len(pkgs) < 50 {
		t.Fatalf("found %d packages; the walk is broken", len(pkgs))
	}
	for _, k := range pkgs {
		if p := docProblem(k); p != "" {
			t.Errorf("%s %s", k.dir, p)
		}
	}
}

func TestDocProblemFindsWhatIsWrong(t *testing.T) {
	for _, c := range []struct {
		k    pkg
		want string // a part of the problem; "" for none
	}{
		{pkg{dir: "x", name: "x", docs: []string{"doc.go: Package x does things."}}, ""},
		{pkg{dir: "cmd/y", name: "main", docs: []string{"main.go: Grapnel-y runs."}}, ""},
		{pkg{dir: "x", name: "xpb", generated: true}, ""},
		{pkg{dir: "x", name: "x"}, "has no package doc"},
		{pkg{dir: "x", name: "x", docs: []string{"a.go: Package x a.", "b.go: Package x b."}}, "one package doc"},
		{pkg{dir: "x", name: "x", docs: []string{"doc.go: Package xy does things."}}, `does not start "Package x "`},
		{pkg{dir: "x", name: "x", docs: []string{"doc.go: This package does things."}}, `does not start "Package x "`},
	} {
		got := docProblem(c.k)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%+v: %q, want %q", c.k, got, c.want)
		}
	}
}

// tableCell is a package, or a folder and all below it (`cmd/*`), in the
// first column of docs/architecture.md's package table.
var tableCell = regexp.MustCompile("`([a-z0-9_/]+(?:/\\*)?)`")

// row is one row of the package table: the packages it is about and
// the imports of ours it names ("all" for a row that may import
// anything).
type row struct {
	pkgs, imports []string
	all           bool
}

var allWord = regexp.MustCompile(`(^|\s)all(\s|$)`)

// tableRows reads the rows of the "## Packages" table.
func tableRows(doc string) []row {
	_, rest, _ := strings.Cut(doc, "\n## Packages\n")
	rest, _, _ = strings.Cut(rest, "\n## ")
	var out []row
	for _, line := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		var r row
		for _, m := range tableCell.FindAllStringSubmatch(cells[1], -1) {
			r.pkgs = append(r.pkgs, m[1])
		}
		last := cells[len(cells)-2]
		r.all = allWord.MatchString(strings.TrimSpace(last))
		for _, m := range tableCell.FindAllStringSubmatch(last, -1) {
			r.imports = append(r.imports, m[1])
		}
		out = append(out, r)
	}
	return out
}

// tablePackages reads the first column of the "## Packages" table.
func tablePackages(doc string) []string {
	var out []string
	for _, r := range tableRows(doc) {
		out = append(out, r.pkgs...)
	}
	return out
}

// covered says whether the table names dir, itself or under a folder/*.
func covered(names []string, dir string) bool {
	for _, n := range names {
		if n == dir || strings.HasSuffix(n, "/*") && strings.HasPrefix(dir, strings.TrimSuffix(n, "*")) {
			return true
		}
	}
	return false
}

// docs/architecture.md's package table names every package of the tree,
// and only packages of the tree.
func TestPackageTableNamesEveryPackage(t *testing.T) {
	r := root(t)
	text, err := os.ReadFile(filepath.Join(r, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := tablePackages(string(text))
	if len(names) < 20 {
		t.Fatalf("read %d names from the package table; is its heading still \"## Packages\"?", len(names))
	}
	dirs := map[string]bool{}
	for _, k := range packages(t, r) {
		dirs[k.dir] = true
		if !covered(names, k.dir) {
			t.Errorf("docs/architecture.md's package table does not name %s: add a row (what it owns, its imports of ours)", k.dir)
		}
	}
	for _, n := range names {
		if !strings.HasSuffix(n, "/*") && !dirs[n] {
			t.Errorf("docs/architecture.md's package table names %s, which is not a package", n)
		}
	}
}

func TestTablePackagesReadsTheFirstColumn(t *testing.T) {
	doc := "x\n## Packages\n\n| package | owns | imports |\n| --- | --- | --- |\n| `a`, `a/b` | it | `c` |\n| `cmd/*` | it | all |\n\n## Time\n| `z` | no | no |\n"
	got := strings.Join(tablePackages(doc), " ")
	if got != "a a/b cmd/*" {
		t.Fatalf("read %q", got)
	}
	names := tablePackages(doc)
	for dir, want := range map[string]bool{"a": true, "a/b": true, "a/c": false, "cmd/x": true, "cmd/x/y": true, "cmdx": false, "c": false} {
		if covered(names, dir) != want {
			t.Errorf("covered(%s) = %v", dir, !want)
		}
	}
}

// imports returns, per package of the module, the packages of the
// module its non-test files import.
func imports(t *testing.T, r string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	cmd.Dir = r
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	mod, err := os.ReadFile(filepath.Join(r, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	modLine, _, _ := strings.Cut(string(mod), "\n")
	prefix := strings.TrimSpace(strings.TrimPrefix(modLine, "module")) + "/"
	got := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		p, ok := strings.CutPrefix(f[0], prefix)
		if !ok {
			continue
		}
		got[p] = []string{}
		for _, imp := range f[1:] {
			if i, ok := strings.CutPrefix(imp, prefix); ok {
				got[p] = append(got[p], i)
			}
		}
	}
	return got
}

// unnamed returns the imports of ours of a row's packages that the row
// names neither as a package of its own nor as an import.
func unnamed(rw row, imps map[string][]string) []string {
	if rw.all {
		return nil
	}
	var bad []string
	for p, is := range imps {
		if !covered(rw.pkgs, p) {
			continue
		}
		for _, i := range is {
			if !covered(rw.pkgs, i) && !covered(rw.imports, i) {
				bad = append(bad, p+" imports "+i)
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// Each row of the package table names every import of ours its packages
// make (outside tests).
func TestPackageTableNamesEveryImport(t *testing.T) {
	r := root(t)
	text, err := os.ReadFile(filepath.Join(r, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	imps := imports(t, r)
	for _, rw := range tableRows(string(text)) {
		for _, b := range unnamed(rw, imps) {
			t.Errorf("docs/architecture.md's package table: %s, which its row %v does not name", b, rw.pkgs)
		}
	}
}

func TestUnnamedFindsAnImportTheRowLacks(t *testing.T) {
	imps := map[string][]string{"a": {"a/b", "c", "d/x"}, "a/b": {"c"}, "e": {"a"}}
	if got := unnamed(row{pkgs: []string{"a", "a/b"}, imports: []string{"c", "d/*"}}, imps); len(got) != 0 {
		t.Errorf("reported %v", got)
	}
	if got := strings.Join(unnamed(row{pkgs: []string{"a", "a/b"}, imports: []string{"c"}}, imps), ";"); got != "a imports d/x" {
		t.Errorf("reported %q, want a imports d/x", got)
	}
	if got := unnamed(row{pkgs: []string{"e"}, all: true}, imps); len(got) != 0 {
		t.Errorf("an all row reported %v", got)
	}
}
