// Package config loads a service's configuration from environment variables
// into a struct tagged with `env:"NAME"` and `envDefault:"value"`, validates it,
// and renders it for a log line with secrets masked.
//
// A field tagged `secret:"true"` is masked by Masked.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"

	"github.com/caarlos0/env/v11"
)

// Validator is implemented by config structs that check relations between
// fields after parsing. The error must name the offending variable.
type Validator interface {
	Validate() error
}

// Parse fills dst (a pointer to a struct) from getenv. Empty variables count as
// unset, so defaults apply. The error names the variable that failed.
func Parse(getenv func(string) string, dst any) error {
	params, err := env.GetFieldParams(dst)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	vars := make(map[string]string, len(params))
	for _, p := range params {
		if v := getenv(p.Key); v != "" {
			vars[p.Key] = v
		}
	}
	if err := env.ParseWithOptions(dst, env.Options{Environment: vars}); err != nil {
		var agg env.AggregateError
		if errors.As(err, &agg) {
			msgs := make([]string, 0, len(agg.Errors))
			for _, e := range agg.Errors {
				var pe env.ParseError
				if errors.As(e, &pe) {
					names := envNames(reflect.TypeOf(dst), pe.Name)
					msgs = append(msgs, fmt.Sprintf("%s: invalid %s: %v", strings.Join(names, " or "), pe.Type, pe.Err))
					continue
				}
				msgs = append(msgs, e.Error())
			}
			return fmt.Errorf("config: %s", strings.Join(msgs, "; "))
		}
		return fmt.Errorf("config: %w", err)
	}
	if v, ok := dst.(Validator); ok {
		if err := v.Validate(); err != nil {
			return fmt.Errorf("config: %w", err)
		}
	}
	return nil
}

// Keys lists the environment variables cfg (a struct or pointer to one) reads.
// The chart test uses it to prove the chart sets no variable a service ignores.
func Keys(cfg any) ([]string, error) {
	params, err := env.GetFieldParams(cfg)
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(params))
	for _, p := range params {
		keys = append(keys, p.Key)
	}
	return keys, nil
}

// Masked renders cfg as a slog group with every `secret:"true"` field that is
// set replaced by "***", so the configuration can be logged once at start.
func Masked(cfg any) slog.Value {
	v := reflect.Indirect(reflect.ValueOf(cfg))
	return maskedStruct(v)
}

func maskedStruct(v reflect.Value) slog.Value {
	t := v.Type()
	attrs := make([]slog.Attr, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		fv := v.Field(i)
		name := f.Tag.Get("env")
		if name == "" {
			name = f.Name
		}
		name, _, _ = strings.Cut(name, ",")
		switch {
		case f.Tag.Get("secret") == "true":
			if fv.IsZero() {
				attrs = append(attrs, slog.String(name, ""))
			} else {
				attrs = append(attrs, slog.String(name, "***"))
			}
		case fv.Kind() == reflect.Struct && f.Tag.Get("env") == "" && fv.Type().PkgPath() != "time":
			attrs = append(attrs, slog.Attr{Key: f.Name, Value: maskedStruct(fv)})
		default:
			attrs = append(attrs, slog.Any(name, fv.Interface()))
		}
	}
	return slog.GroupValue(attrs...)
}

// envNames finds the variables of the fields called field anywhere in the
// (possibly nested) struct type t, so a parse error can name the variable.
func envNames(t reflect.Type, field string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		if f.Name == field && tag != "" {
			names = append(names, tag)
		}
		if f.Type.Kind() == reflect.Struct && tag == "" {
			names = append(names, envNames(f.Type, field)...)
		}
	}
	if len(names) == 0 {
		names = []string{field}
	}
	return names
}
