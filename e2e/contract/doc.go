// Package contract checks the published contract and the client built on
// it against the running stack (`make up`):
//
//   - the OpenAPI 3.1 documents in api/ are valid OpenAPI, every error
//     answer they list is the JSON error body, and every route a service's
//     router serves is documented (and the reverse);
//   - real requests to the collector, tokens service and audit logger, good
//     and bad, get answers the documents allow (libopenapi-validator), and
//     each service serves its document at /openapi.json;
//   - the Go client (sdk/go) stores every event exactly once in Postgres
//     across 429s from a rate-limited collector, a process restart with its
//     spool and, under the build tag `fault`, a collector killed mid-stream
//     and the broker restarted. Every answer the client gets there is
//     validated against the collector's document too.
package contract
