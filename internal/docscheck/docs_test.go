package docscheck

import (
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
}

func scan(t *testing.T, r string) *tree {
	t.Helper()
	tr := &tree{paths: map[string]bool{}, bases: map[string]bool{}, pkgs: map[string]map[string]bool{},
		types: map[string]map[string]bool{}, tops: map[string]bool{}, funcs: map[string]bool{}}
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
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil // generated or broken files are the compiler's business
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
		} else if m := protoField.FindStringSubmatch(line); m != nil {
			cur[m[1]] = true
			cur[camel(m[1])] = true
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
)

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
			if members, ok := tr.types[x]; ok && isExported(x) && !members[y] {
				bad = append(bad, "member `"+s+"`")
			}
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
	for _, gone := range []string{"`internal/testwait.NoSuch`", "`Cluster.NoSuchRPC`", "`ApplyRequest.noSuchField`", "`TestNoSuchTest`"} {
		if len(tr.check("docs/security.md", gone)) != 1 {
			t.Errorf("%q not reported", gone)
		}
	}
	for _, there := range []string{"`rpc/authz/guard.go`", "`guard.go`", "`authz.Check`", "`Guard.Identify`", "[x](security.md#roles)", "`grapnel://replica/ID`", "`cfg.Timing`",
		"`internal/testwait.For`", "`Cluster.Status`", "`ApplyRequest.expectedRevision`", "`history.json`", "`_test.go`", "`TestDocsNameWhatExists`"} {
		if bad := tr.check("docs/security.md", there); len(bad) != 0 {
			t.Errorf("%q reported: %v", there, bad)
		}
	}
}
