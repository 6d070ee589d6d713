// Package web holds the admin interface's HTML templates and static files,
// embedded in the binary.
package web

import "embed"

// Templates are the page templates: layout.html plus one file per page.
//
//go:embed templates/*.html
var Templates embed.FS

// Static are the files served under /static/ (CSS, the one small script,
// and the licences of anything vendored).
//
//go:embed static
var Static embed.FS
