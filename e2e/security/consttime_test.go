package security

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"threatview/platform/testenv"
)

// secretWords mark identifiers that hold a key, a token or its hash.
var secretWords = []string{"key", "token", "secret", "hash", "plain", "password", "passcode"}

// allowedCompare lists functions where a plain comparison of secrets is
// harmless, with the reason.
var allowedCompare = map[string]string{
	// Startup validation compares two configured keys (ADMIN_KEY and
	// INTERNAL_KEY must differ); no request can time it.
	"Config.Validate": "startup configuration check",
}

// secretComparisons returns the comparisons in one Go source that compare a
// secret-named value with ==, !=, bytes.Equal, strings.EqualFold,
// strings.Compare or reflect.DeepEqual against anything but a literal, nil,
// a constant or a length.
func secretComparisons(fset *token.FileSet, f *ast.File) []string {
	consts := map[string]bool{}
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
			for _, s := range g.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					consts[n.Name] = true
				}
			}
		}
	}
	harmless := func(e ast.Expr) bool {
		switch x := ast.Unparen(e).(type) {
		case *ast.BasicLit:
			return true
		case *ast.Ident:
			return x.Name == "nil" || x.Name == "true" || x.Name == "false" || consts[x.Name]
		case *ast.CallExpr:
			if id, ok := x.Fun.(*ast.Ident); ok && (id.Name == "len" || id.Name == "cap") {
				return true
			}
		case *ast.SelectorExpr:
			// A constant of another package (sha256.Size) or an exported
			// constant-looking name.
			if _, ok := x.X.(*ast.Ident); ok && (x.Sel.Name == "Size" || consts[x.Sel.Name]) {
				return true
			}
		}
		return false
	}
	secret := func(e ast.Expr) bool {
		found := false
		ast.Inspect(e, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok {
				if id, ok := c.Fun.(*ast.Ident); ok && (id.Name == "len" || id.Name == "cap") {
					return false
				}
			}
			if id, ok := n.(*ast.Ident); ok {
				name := strings.ToLower(id.Name)
				for _, w := range secretWords {
					if strings.Contains(name, w) {
						found = true
					}
				}
			}
			return !found
		})
		return found
	}
	var out []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		name := fn.Name.Name
		if fn.Recv != nil && len(fn.Recv.List) > 0 {
			rt := fn.Recv.List[0].Type
			if s, ok := rt.(*ast.StarExpr); ok {
				rt = s.X
			}
			if id, ok := rt.(*ast.Ident); ok {
				name = id.Name + "." + name
			}
		}
		if _, ok := allowedCompare[name]; ok {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			var a, b ast.Expr
			what := ""
			switch x := n.(type) {
			case *ast.BinaryExpr:
				if x.Op == token.EQL || x.Op == token.NEQ {
					a, b, what = x.X, x.Y, x.Op.String()
				}
			case *ast.CallExpr:
				if sel, ok := x.Fun.(*ast.SelectorExpr); ok && len(x.Args) == 2 {
					if pkg, ok := sel.X.(*ast.Ident); ok {
						switch pkg.Name + "." + sel.Sel.Name {
						case "bytes.Equal", "strings.EqualFold", "strings.Compare", "bytes.Compare", "reflect.DeepEqual":
							a, b, what = x.Args[0], x.Args[1], pkg.Name+"."+sel.Sel.Name
						}
					}
				}
			}
			if a == nil || harmless(a) || harmless(b) || !(secret(a) || secret(b)) {
				return true
			}
			out = append(out, fset.Position(n.Pos()).String()+": "+name+" compares a secret with "+what)
			return true
		})
	}
	return out
}

// usesCall reports whether function fn of file f calls pkg.name.
func usesCall(f *ast.File, fn, pkg, name string) bool {
	found := false
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Name.Name != fn || fd.Body == nil {
			continue
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok {
				switch f := c.Fun.(type) {
				case *ast.SelectorExpr:
					if id, ok := f.X.(*ast.Ident); ok && id.Name == pkg && f.Sel.Name == name {
						found = true
					}
				case *ast.Ident:
					if pkg == "" && f.Name == name {
						found = true
					}
				}
			}
			return !found
		})
	}
	return found
}

// TestSecretComparisonsAreConstantTime reads the code that checks keys and
// tokens (services/tokens, platform/httpserver, the collector's token
// cache, the audit logger's API): no secret may be compared with == or
// bytes.Equal, and the comparisons that decide access must go through
// crypto/subtle (or hmac.Equal).
func TestSecretComparisonsAreConstantTime(t *testing.T) {
	t.Run("DetectorSelfTest", func(t *testing.T) {
		src := `package p
const Prefix = "tvk_"
func bad(key, got string) bool { return key == got }
func badBytes(hash, h []byte) bool { return bytes.Equal(hash, h) }
func ok(token string) bool { return token == "" || len(token) != 47 || token[:4] == Prefix }
func good(a, b []byte) bool { return subtle.ConstantTimeCompare(a, b) == 1 }`
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "p.go", src, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := secretComparisons(fset, f)
		if len(got) != 2 || !strings.Contains(got[0], "bad compares") || !strings.Contains(got[1], "badBytes compares") {
			t.Errorf("secretComparisons found %q, want bad and badBytes only", got)
		}
	})

	root := testenv.Root(t)
	files := map[string]*ast.File{}
	fset := token.NewFileSet()
	for _, dir := range []string{"services/tokens", "services/platform/httpserver", "services/collector/tokenauth", "services/auditlogger/httpapi",
		"services/identity", "services/platform/authz"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			files[filepath.ToSlash(rel)] = f
			for _, p := range secretComparisons(fset, f) {
				t.Errorf("%s", p)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("read %s: %v", dir, err)
		}
	}
	for _, c := range []struct{ file, fn, pkg, call string }{
		{"services/platform/httpserver/auth.go", "KeyEqual", "subtle", "ConstantTimeCompare"},
		{"services/platform/httpserver/auth.go", "RequireKey", "", "KeyEqual"},
		{"services/tokens/service.go", "Introspect", "subtle", "ConstantTimeCompare"},
		{"services/identity/password.go", "Verify", "subtle", "ConstantTimeCompare"},
		{"services/platform/authz/authz.go", "Authenticate", "httpserver", "KeyEqual"},
		{"services/identity/oidc/oidc.go", "Finish", "subtle", "ConstantTimeCompare"},
	} {
		f := files[c.file]
		if f == nil {
			t.Errorf("%s not found", c.file)
			continue
		}
		if !usesCall(f, c.fn, c.pkg, c.call) && !usesCall(f, c.fn, "hmac", "Equal") {
			t.Errorf("%s: %s does not call %s.%s (nor hmac.Equal)", c.file, c.fn, c.pkg, c.call)
		}
	}
	if len(files) < 5 {
		t.Errorf("read only %d files: the walk is not seeing the services", len(files))
	}
}
