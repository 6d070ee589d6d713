package charts

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"threatview/auditlogger/trail/s3store"
	"threatview/platform/config"
	"threatview/platform/httpserver"
	"threatview/platform/mq"
)

// cmdConfigs are the services whose Config type this module does not import
// (a command's package main cannot be imported): their variables are read
// from the source of the directory holding `type Config struct` instead (env
// tags, plus the shared platform structs the Config holds as fields).
var cmdConfigs = map[string]string{
	"identity":            "../services/identity/cmd/identity",
	"visual-renderer":     "../services/visualrenderer/cmd/visualrenderer",
	"privacy":             "../services/retention/cmd/privacy",
	"alerts":              "../services/alerts/cmd/alerts",
	"admin-interface":     "../services/admininterface/cmd/admininterface",
	"smoketest":           "../deploy/smoketest",
	"tokens":              "../services/tokens/cmd/tokens",
	"audit-logger":        "../services/auditlogger/cmd/auditlogger",
	"audit-logger-worker": "../services/auditlogger/cmd/auditworker",
	"audit-verify":        "../services/auditlogger/cmd/auditverify",
	"data-collector":      "../services/collector/cmd/collector",
	"data-processor":      "../services/processor/cmd/processor",
}

// platformConfigs are the shared structs a command's Config may hold, by the
// selector it is written with.
var platformConfigs = map[string]func() any{
	"httpserver.Config": func() any { return &httpserver.Config{} },
	"mq.Config":         func() any { return &mq.Config{} },
	"s3store.Env":       func() any { return &s3store.Env{} },
}

// cmdConfigKeys returns the variables the Config struct in dir/*.go reads and
// those it requires (",required" in the env tag).
func cmdConfigKeys(t *testing.T, dir string) (keys, required []string) {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || ts.Name.Name != "Config" {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return false
			}
			found = true
			for _, field := range st.Fields.List {
				if field.Tag != nil {
					tag, err := strconv.Unquote(field.Tag.Value)
					if err != nil {
						t.Fatal(err)
					}
					if env, ok := reflect.StructTag(tag).Lookup("env"); ok {
						name, opts, _ := strings.Cut(env, ",")
						keys = append(keys, name)
						if strings.Contains(","+opts+",", ",required,") {
							required = append(required, name)
						}
						continue
					}
				}
				if sel, ok := field.Type.(*ast.SelectorExpr); ok {
					pkg, _ := sel.X.(*ast.Ident)
					if pkg == nil {
						continue
					}
					newCfg, ok := platformConfigs[pkg.Name+"."+sel.Sel.Name]
					if !ok {
						t.Fatalf("%s: Config field of type %s.%s: add it to platformConfigs", dir, pkg.Name, sel.Sel.Name)
					}
					sub, err := config.Keys(newCfg())
					if err != nil {
						t.Fatal(err)
					}
					keys = append(keys, sub...)
				}
			}
			return false
		})
	}
	if !found {
		t.Fatalf("%s: no Config struct", dir)
	}
	return keys, required
}
