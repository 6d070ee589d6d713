package httpserver

import (
	"runtime"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// NewBuildInfo returns the gauge SERVICE_build_info{version, goversion} = 1
// (dashes in service become underscores), which the admin interface's status
// page reads each service's version from.
func NewBuildInfo(service, version string) prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: strings.ReplaceAll(service, "-", "_") + "_build_info",
		Help: "Always 1; labelled with the build's version and the Go version it was built with.",
	}, []string{"version", "goversion"})
	g.WithLabelValues(version, runtime.Version()).Set(1)
	return g
}
