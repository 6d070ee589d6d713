// Package security holds the project's security checks that are not tied to
// one service: static checks over the source tree, and tests against the
// running stack (make up) for secrets, keys and cross-app writes.
package security

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"threatview/platform/testenv"
)

// sqlMethods are the database/sql and pgx methods that take SQL text.
var sqlMethods = map[string]bool{
	"Exec": true, "ExecContext": true, "Query": true, "QueryContext": true,
	"QueryRow": true, "QueryRowContext": true, "Prepare": true, "PrepareContext": true,
}

// TestSQLIsParameterised walks every non-test Go file of the project and
// checks that every statement handed to a database is either a constant
// (values travel as placeholders) or, where the text must be built (a
// partition name, a list of placeholders), carries a `// sql:` comment within
// three lines above saying why no input reaches the text. A new query built
// with fmt.Sprintf and no such justification fails this test.
func TestSQLIsParameterised(t *testing.T) {
	root := testenv.Root(t)
	var problems []string
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		p, n := checkFile(t, root, path)
		problems = append(problems, p...)
		checked += n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 20 {
		t.Fatalf("found only %d SQL calls: the walk is not seeing the services", checked)
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Errorf("%s", p)
	}
	t.Logf("checked %d SQL calls", checked)
}

// checkFile returns the unjustified dynamic SQL calls in one file and how
// many SQL calls it saw.
func checkFile(t *testing.T, root, path string) ([]string, int) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	consts := packageConsts(t, filepath.Dir(path))
	justified := map[int]bool{}
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			if strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(c.Text, "//")), "sql:") {
				line := fset.Position(c.Pos()).Line
				for l := line; l <= line+3; l++ {
					justified[l] = true
				}
			}
		}
	}
	rel, _ := filepath.Rel(root, path)
	var problems []string
	n := 0
	ast.Inspect(f, func(node ast.Node) bool {
		call, ok := node.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || !sqlMethods[sel.Sel.Name] || len(call.Args) == 0 {
			return true
		}
		if recv, ok := sel.X.(*ast.Ident); ok && strings.Contains(strings.ToLower(recv.Name), "stmt") {
			return true // a prepared statement: its arguments are values
		}
		arg := call.Args[0]
		if isContext(arg) {
			if len(call.Args) < 2 {
				return true
			}
			arg = call.Args[1]
		}
		if !looksLikeSQL(arg, consts) {
			return true // e.g. url.Values.Query(), a store's own Query method
		}
		n++
		if isConstant(arg, consts) {
			return true
		}
		line := fset.Position(call.Pos()).Line
		if justified[line] {
			return true
		}
		problems = append(problems, rel+":"+itoa(line)+": "+sel.Sel.Name+" with SQL built at run time and no `// sql:` justification")
		return true
	})
	return problems, n
}

func isContext(e ast.Expr) bool {
	switch v := e.(type) {
	case *ast.Ident:
		return strings.Contains(strings.ToLower(v.Name), "ctx")
	case *ast.CallExpr:
		if s, ok := v.Fun.(*ast.SelectorExpr); ok {
			if x, ok := s.X.(*ast.Ident); ok && x.Name == "context" {
				return true
			}
			return strings.Contains(strings.ToLower(s.Sel.Name), "context")
		}
	case *ast.SelectorExpr:
		return strings.Contains(strings.ToLower(v.Sel.Name), "ctx")
	}
	return false
}

// looksLikeSQL tells SQL arguments from other calls that share a method name:
// a string literal, a constant, a string-building call or a variable.
func looksLikeSQL(e ast.Expr, consts map[string]bool) bool {
	switch v := e.(type) {
	case *ast.BasicLit:
		return v.Kind == token.STRING
	case *ast.Ident:
		if consts[v.Name] {
			return true
		}
		name := strings.ToLower(v.Name)
		for _, w := range []string{"q", "query", "sql", "stmt", "statement"} {
			if name == w || strings.HasSuffix(name, w) || strings.HasPrefix(name, w) {
				return true
			}
		}
		return false
	case *ast.BinaryExpr:
		return v.Op == token.ADD
	case *ast.CallExpr:
		if s, ok := v.Fun.(*ast.SelectorExpr); ok {
			return s.Sel.Name == "Sprintf" || s.Sel.Name == "String" || s.Sel.Name == "Join"
		}
	case *ast.SelectorExpr:
		return true
	}
	return false
}

func isConstant(e ast.Expr, consts map[string]bool) bool {
	switch v := e.(type) {
	case *ast.BasicLit:
		return true
	case *ast.Ident:
		return consts[v.Name]
	case *ast.BinaryExpr:
		return v.Op == token.ADD && isConstant(v.X, consts) && isConstant(v.Y, consts)
	case *ast.ParenExpr:
		return isConstant(v.X, consts)
	}
	return false
}

var constCache = map[string]map[string]bool{}

// packageConsts lists the constant names declared at the top level of the
// package in dir.
func packageConsts(t *testing.T, dir string) map[string]bool {
	if c, ok := constCache[dir]; ok {
		return c
	}
	consts := map[string]bool{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", e.Name(), err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					consts[n.Name] = true
				}
			}
		}
	}
	constCache[dir] = consts
	return consts
}

func itoa(n int) string { return strconv.Itoa(n) }
