// Package logging builds the JSON slog logger every service uses.
package logging

import (
	"io"
	"log/slog"
	"strings"
)

// New returns a JSON logger writing to w whose every record carries service
// and version. level is one of debug, info, warn, error (default info).
func New(w io.Writer, service, version, level string) *slog.Logger {
	var l slog.Level
	switch strings.ToLower(level) {
	case "debug":
		l = slog.LevelDebug
	case "warn":
		l = slog.LevelWarn
	case "error":
		l = slog.LevelError
	default:
		l = slog.LevelInfo
	}
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})
	return slog.New(h).With("service", service, "version", version)
}
