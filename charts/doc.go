// Package charts holds the tests of the Helm charts under this directory: they
// lint and render each chart with the Helm library and decode every rendered
// object strictly into its Kubernetes API type.
package charts
