package docscheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository's top, two levels above this package.
func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// tree is what the documents may name: the files and directories, the
// base names of files, and per Go package name the names it declares
// (functions, types, variables, constants; methods and struct fields as
// Type.Name).
type tree struct {
	paths map[string]bool
	bases map[string]bool
	pkgs  map[string]map[string]bool
	types map[string]map[string]bool // exported type → its methods and fields
	tops  map[string]bool            // top-level directories
	funcs map[string]bool            // every function name, tests included
	// idents is every identifier the Go and .proto sources spell,
	// locals and fields included: a bare `name` in a document or a
	// comment must be one of them.
	idents map[string]bool
	// comments are the Go comments of the tree's own (not generated)
	// files, which name code as the documents do.
	comments []comment
}

// textFile are the extensions of the configuration, scripts and data
// whose words are names a document may use (a unit's `ExecStart`, a
// manifest's `runtimeConfig`).
var textFile = map[string]bool{".yaml": true, ".yml": true, ".sh": true, ".toml": true, ".conf": true, ".json": true, ".service": true, ".golden": true, ".txt": true}

var word = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

// words adds every word of text to the names.
func (tr *tree) words(text string) {
	for _, w := range word.FindAllString(text, -1) {
		tr.idents[w] = true
	}
}

// comment is one comment group and where it is.
type comment struct {
	pos  string // file:line
	text string
}

func scan(t *testing.T, r string) *tree {
	t.Helper()
	tr := &tree{paths: map[string]bool{}, bases: map[string]bool{}, pkgs: map[string]map[string]bool{},
		types: map[string]map[string]bool{}, tops: map[string]bool{}, funcs: map[string]bool{}, idents: map[string]bool{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(r, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(r, p)
		if rel == "." {
			return nil
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		rel = filepath.ToSlash(rel)
		tr.paths[rel] = true
		tr.bases[d.Name()] = true
		if d.IsDir() && !strings.Contains(rel, "/") {
			tr.tops[rel] = true
		}
		if !d.IsDir() && strings.HasSuffix(p, ".proto") {
			return tr.scanProto(p)
		}
		if !d.IsDir() && (textFile[filepath.Ext(p)] || strings.HasPrefix(rel, "deploy/systemd/")) {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			tr.words(string(data))
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution|parser.ParseComments)
		if err != nil {
			return nil // generated or broken files are the compiler's business
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.Ident:
				tr.idents[x.Name] = true
			case *ast.BasicLit:
				// This package's own strings name what is gone, on purpose.
				if x.Kind == token.STRING && !strings.HasPrefix(rel, "internal/docscheck/") {
					tr.words(x.Value)
				}
			}
			return true
		})
		if !ast.IsGenerated(f) {
			for _, cg := range f.Comments {
				tr.comments = append(tr.comments, comment{
					pos:  fmt.Sprintf("%s:%d", rel, fset.Position(cg.Pos()).Line),
					text: cg.Text(),
				})
			}
		}
		names := tr.pkgs[f.Name.Name]
		if names == nil {
			names = map[string]bool{}
			tr.pkgs[f.Name.Name] = names
		}
		member := func(typ, name string) {
			if tr.types[typ] == nil {
				tr.types[typ] = map[string]bool{}
			}
			tr.types[typ][name] = true
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				names[d.Name.Name] = true
				tr.funcs[d.Name.Name] = true
				if d.Recv != nil && len(d.Recv.List) == 1 {
					member(recvType(d.Recv.List[0].Type), d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						names[s.Name.Name] = true
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, fl := range st.Fields.List {
								for _, n := range fl.Names {
									member(s.Name.Name, n.Name)
								}
							}
						}
						if it, ok := s.Type.(*ast.InterfaceType); ok {
							for _, m := range it.Methods.List {
								for _, n := range m.Names {
									member(s.Name.Name, n.Name)
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							names[n.Name] = true
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

var (
	protoBlock = regexp.MustCompile(`^\s*(service|message)\s+([A-Za-z0-9_]+)\s*\{`)
	protoRPC   = regexp.MustCompile(`^\s*rpc\s+([A-Za-z0-9_]+)\s*\(`)
	protoField = regexp.MustCompile(`^\s*(?:repeated\s+|optional\s+)?[A-Za-z0-9_.<>, ]+\s+([a-z][A-Za-z0-9_]*)\s*=\s*\d+`)
)

// scanProto adds the services' methods and the messages' fields (as
// written and in their JSON camelCase) of a .proto file, which the
// documents name like Go members: `Cluster.Status`, `ApplyRequest.expectedRevision`.
func (tr *tree) scanProto(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var stack []string
	for _, line := range strings.Split(string(data), "\n") {
		if m := protoBlock.FindStringSubmatch(line); m != nil {
			stack = append(stack, m[2])
			tr.idents[m[2]] = true
			if tr.types[m[2]] == nil {
				tr.types[m[2]] = map[string]bool{}
			}
			continue
		}
		if len(stack) == 0 {
			continue
		}
		if strings.Contains(line, "{") && !strings.Contains(line, "}") {
			// A oneof's fields are its message's; an enum's values are
			// nobody's fields.
			inner := stack[len(stack)-1]
			if strings.Contains(line, "enum ") {
				inner = ""
			}
			stack = append(stack, inner)
			continue
		}
		cur := tr.types[stack[len(stack)-1]]
		if cur == nil {
			cur = map[string]bool{}
		}
		if m := protoRPC.FindStringSubmatch(line); m != nil {
			cur[m[1]] = true
			tr.idents[m[1]] = true
		} else if m := protoField.FindStringSubmatch(line); m != nil {
			cur[m[1]] = true
			cur[camel(m[1])] = true
			tr.idents[m[1]] = true
			tr.idents[camel(m[1])] = true
		}
		if strings.Contains(line, "}") && !strings.Contains(line, "{") {
			stack = stack[:len(stack)-1]
		}
	}
	return nil
}

// camel is a proto field name as JSON writes it: expected_revision →
// expectedRevision.
func camel(s string) string {
	parts := strings.Split(s, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

func recvType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

var (
	codeSpan = regexp.MustCompile("`([^`\n]+)`")
	mdLink   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	pathLike = regexp.MustCompile(`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.*-]+)*/?$`)
	fileLike = regexp.MustCompile(`^[A-Za-z0-9-][A-Za-z0-9_-]*\.(go|sh|proto)$`)
	// pkgSymbol is a package path and a name it declares:
	// `internal/testwait.For`.
	pkgSymbol = regexp.MustCompile(`^([a-z0-9_]+(?:/[a-z0-9_]+)+)\.([A-Z][A-Za-z0-9_]*)(\(\))?$`)
	// notSymbols are the extensions of data files a document names by
	// their base name, which look like pkg.Name.
	notSymbols = map[string]bool{"json": true, "conf": true, "yaml": true, "md": true, "txt": true, "toml": true, "pem": true, "key": true, "log": true, "bin": true, "svg": true, "html": true, "dot": true, "golden": true}
	testName   = regexp.MustCompile(`^(Test|Benchmark|Fuzz)[A-Z_][A-Za-z0-9_]*$`)
	symbol     = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)(\(\))?$`)
	// goName is a bare name in Go's mixed case, `holdFor` or
	// `NewNode()`: a word with a lower- and an upper-case letter and no
	// other signs, which in these documents is always a name of the code
	// (flags, keys and commands are written in lower case or with
	// dashes).
	goName = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9]*)(\(\))?$`)
)

// foreign are the bare names the documents and comments take from other
// code, which this tree need not spell: each with whose name it is.
var foreign = map[string]string{
	"dispatchLogs":  "hashicorp/raft's leader",
	"permTest":      "hashicorp/raft's snapshot store",
	"appendCommit":  "hashicorp/raft-wal's segment writer",
	"runRotate":     "hashicorp/raft-wal's rotation goroutine",
	"Created":       "a podman container state",
	"hostPort":      "a Kubernetes container port field",
	"FirstOccurred": "MAMID's problem record",
	"LastUpdated":   "MAMID's problem record",
	// Files of other modules, named in comments.
	"page.go":   "go.etcd.io/bbolt",
	"db.go":     "go.etcd.io/bbolt",
	"bucket.go": "go.etcd.io/bbolt",
	"eval.go":   "aymerick/raymond",
}

// mixed says whether s has both a lower- and an upper-case letter.
func mixed(s string) bool {
	return strings.ContainsAny(s, "abcdefghijklmnopqrstuvwxyz") && strings.ContainsAny(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
}

// check returns what a document names that the tree lacks.
func (tr *tree) check(doc, text string) []string {
	var bad []string
	dir := filepath.ToSlash(filepath.Dir(doc))
	for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
		target, _, _ := strings.Cut(m[1], "#")
		if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		p := filepath.ToSlash(filepath.Clean(filepath.Join(dir, target)))
		if !tr.paths[p] {
			bad = append(bad, "link "+m[1])
		}
	}
	for _, m := range codeSpan.FindAllStringSubmatch(text, -1) {
		s := m[1]
		switch {
		case testName.MatchString(s):
			if !tr.funcs[s] {
				bad = append(bad, "test `"+s+"`")
			}
		case pkgSymbol.MatchString(s):
			sm := pkgSymbol.FindStringSubmatch(s)
			first, _, _ := strings.Cut(sm[1], "/")
			if !tr.tops[first] {
				continue
			}
			pkg := sm[1][strings.LastIndexByte(sm[1], '/')+1:]
			if !tr.paths[sm[1]] || !tr.pkgs[pkg][sm[2]] {
				bad = append(bad, "symbol `"+s+"`")
			}
		case strings.Contains(s, "/") && pathLike.MatchString(s):
			first, _, _ := strings.Cut(s, "/")
			if !tr.tops[first] || strings.Contains(s, "*") {
				continue // not a path of this tree (a URI, a metric label, a pattern)
			}
			if !tr.paths[strings.TrimSuffix(s, "/")] {
				bad = append(bad, "path `"+s+"`")
			}
		case fileLike.MatchString(s):
			if !tr.bases[s] {
				bad = append(bad, "file `"+s+"`")
			}
		case symbol.MatchString(s):
			sm := symbol.FindStringSubmatch(s)
			x, y := sm[1], sm[2]
			if notSymbols[y] {
				continue
			}
			if names, ok := tr.pkgs[x]; ok && x != "state" || ok && names[y] {
				if !names[y] {
					bad = append(bad, "symbol `"+s+"`")
				}
				continue
			}
			if members, ok := tr.types[x]; ok && (isExported(x) || tr.pkgs[x] == nil) && !members[y] {
				bad = append(bad, "member `"+s+"`")
			}
		case goName.MatchString(s):
			name := goName.FindStringSubmatch(s)[1]
			if mixed(name) && !tr.idents[name] && foreign[name] == "" {
				bad = append(bad, "name `"+s+"`")
			}
		}
	}
	return bad
}

// fileWord is a file a comment names outside a code span: `(see
// cluster/node.go:12)`, `in logstore.go`.
var fileWord = regexp.MustCompile(`(?:^|[\s(])([A-Za-z0-9_][A-Za-z0-9_./-]*\.(?:go|proto|sh))(?::\d+(?:-\d+)?)?(?:$|[\s),;:.])`)

// checkFiles returns the files a comment's text names outside code spans
// that the tree lacks: a path of one of the tree's top-level directories,
// or a base name. A path into another tree (hashicorp/raft's raft.go) is
// not this check's business when it does not start with one of ours.
func (tr *tree) checkFiles(text string) []string {
	var bad []string
	text = codeSpan.ReplaceAllString(text, "")
	for _, m := range fileWord.FindAllStringSubmatch(text, -1) {
		f := m[1]
		if i := strings.LastIndexByte(f, '/'); i >= 0 {
			first, _, _ := strings.Cut(f, "/")
			if tr.tops[first] && !tr.paths[f] {
				bad = append(bad, "path "+f)
			}
			continue
		}
		if !tr.bases[f] && foreign[f] == "" {
			bad = append(bad, "file "+f)
		}
	}
	return bad
}

func isExported(s string) bool { return s != "" && s[0] >= 'A' && s[0] <= 'Z' }

// Every Markdown document of the tree (docs/, the README, the deploy and
// chaos notes) names only files, directories, symbols and methods that
// exist.
func TestDocsNameWhatExists(t *testing.T) {
	r := root(t)
	tr := scan(t, r)
	var docs []string
	for p := range tr.paths {
		if strings.HasSuffix(p, ".md") {
			docs = append(docs, p)
		}
	}
	if len(docs) == 0 {
		t.Fatal("no documents found")
	}
	for _, d := range docs {
		text, err := os.ReadFile(filepath.Join(r, d))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range tr.check(d, string(text)) {
			t.Errorf("%s names %s, which is not in the tree", d, b)
		}
	}
}

// The check itself finds what is gone: a renamed file, a removed
// function, a method that was never there, a broken link.
func TestCheckFindsWhatIsGone(t *testing.T) {
	tr := scan(t, root(t))
	for _, gone := range []string{
		"see `rpc/authz/no_such_file.go`",
		"see `no_such_file.go`",
		"`authz.NoSuchFunction`",
		"`Guard.NoSuchMethod`",
		"[x](no-such-doc.md)",
	} {
		if len(tr.check("docs/security.md", gone)) != 1 {
			t.Errorf("%q not reported", gone)
		}
	}
	for _, gone := range []string{"`internal/testwait.NoSuch`", "`Cluster.NoSuchRPC`", "`ApplyRequest.noSuchField`", "`TestNoSuchTest`",
		"`revokeLeadership` drops", "`leader.revokeAll`", "`noSuchName()`"} {
		if len(tr.check("docs/security.md", gone)) != 1 {
			t.Errorf("%q not reported", gone)
		}
	}
	for _, there := range []string{"`rpc/authz/guard.go`", "`guard.go`", "`authz.Check`", "`Guard.Identify`", "[x](security.md#roles)", "`grapnel://replica/ID`", "`cfg.Timing`",
		"`internal/testwait.For`", "`Cluster.Status`", "`ApplyRequest.expectedRevision`", "`history.json`", "`_test.go`", "`TestDocsNameWhatExists`",
		"`leader.revoke`", "`leaderLoop`", "`NewNode()`", "`runtimeConfig`", "`ExecStart`", "`dispatchLogs`", "`ctx`", "`FAILED`"} {
		if bad := tr.check("docs/security.md", there); len(bad) != 0 {
			t.Errorf("%q reported: %v", there, bad)
		}
	}
}

// The check of comments finds a file named outside a code span that is
// gone, and leaves alone the files of other trees.
func TestCheckFilesFindsWhatIsGone(t *testing.T) {
	tr := scan(t, root(t))
	for _, gone := range []string{"the rest is in placement_leader.go.", "(see server/no_such.go:12)", "cluster/nosuch.go and more"} {
		if bad := tr.checkFiles(gone); len(bad) != 1 {
			t.Errorf("%q: reported %v, want one", gone, bad)
		}
	}
	for _, there := range []string{"see cluster/node.go:12-30.", "(logstore.go)", "hashicorp/raft's raft.go:914", "bbolt's page.go", "a `no_such.go` span is check's", "file.gone.txt"} {
		if bad := tr.checkFiles(there); len(bad) != 0 {
			t.Errorf("%q reported: %v", there, bad)
		}
	}
}

// Every comment of the tree's Go code names, in code spans, only files,
// directories, symbols, methods and names that exist, as the documents
// do.
func TestCommentsNameWhatExists(t *testing.T) {
	tr := scan(t, root(t))
	if len(tr.comments) == 0 {
		t.Fatal("no comments found")
	}
	for _, c := range tr.comments {
		file, _, _ := strings.Cut(c.pos, ":")
		for _, b := range tr.check(file, c.text) {
			t.Errorf("%s: the comment names %s, which is not in the tree", c.pos, b)
		}
		for _, b := range tr.checkFiles(c.text) {
			t.Errorf("%s: the comment names %s, which is not in the tree", c.pos, b)
		}
	}
}
