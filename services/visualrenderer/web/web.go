// Package web holds the dashboards' HTML templates and static files,
// embedded in the binary: no CDN, no build step, no JavaScript.
package web

import (
	"embed"
	"html/template"
	"io/fs"
	"strings"
)

// Static is the static files, under static/.
//
//go:embed static
var Static embed.FS

//go:embed templates
var templates embed.FS

// Funcs are the helpers the templates use.
var Funcs = template.FuncMap{
	// dict builds a map from key, value pairs, to pass several values to
	// a sub-template.
	"dict": func(kv ...any) map[string]any {
		m := make(map[string]any, len(kv)/2)
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	},
	"label": func(s string) string {
		if s == "" {
			return "(none)"
		}
		return s
	},
}

// Templates parses every page of templates/ with the shared layout
// (layout.html) and returns them by file name without .html.
func Templates() map[string]*template.Template {
	names, err := fs.Glob(templates, "templates/*.html")
	if err != nil {
		panic(err)
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		if strings.HasSuffix(n, "/layout.html") {
			continue
		}
		t := template.Must(template.New("layout.html").Funcs(Funcs).ParseFS(templates, "templates/layout.html", n))
		out[strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")] = t
	}
	return out
}
