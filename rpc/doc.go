// Package rpc is the wire side of Grapnel. The .proto files in proto/ and
// the generated packages ankbase, grpcapi, controlapi and grapnelpb describe
// the Ankaios v1 protocol (plus Grapnel's own cluster service); this package
// holds what every component needs around them:
//
//   - conversions between the protobuf messages and the model of package
//     state: typed fast paths for the hot paths (agent updates, state
//     reports) and a Tree view that keeps partial objects, which field-masked
//     reads and update masks work on;
//   - the single place where the sentinel errors of internal/errs and
//     state become gRPC status codes (ToStatus, which the server
//     interceptors UnaryStatus and StreamStatus apply to every handler's
//     error) and back (FromStatus);
//   - the Ankaios protocol version check;
//   - mTLS configuration and the peer-name check that binds an agent name to
//     its client certificate;
//   - request-id prefixes that route responses back to their connection.
//
// The package depends only on state, the generated code and the leaves
// internal/errs, internal/tlsreload and internal/connlimit.
package rpc
