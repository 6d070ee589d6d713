// Package platform holds what every Threat View service shares and nothing a
// single service decides: configuration from the environment, JSON logging,
// the HTTP server with health and metrics endpoints, the STOMP client, the
// shared pipeline and leader loop with its PostgreSQL advisory lock
// (pglock), the wire formats services exchange over the broker, and
// integration-test helpers.
package platform
