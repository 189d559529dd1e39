package rpc

import (
	"context"

	"google.golang.org/grpc"
)

// UnaryStatus is the server interceptor that gives a unary handler's error
// its gRPC status through ToStatus, so that handlers return plain errors
// (errs sentinels wrapped with %w, state.ErrInvalid) and the mapping to
// codes and structured details happens in one place.
func UnaryStatus(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	return resp, ToStatus(err)
}

// StreamStatus is UnaryStatus for streaming handlers.
func StreamStatus(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return ToStatus(handler(srv, ss))
}

// StatusInterceptors installs UnaryStatus and StreamStatus on a gRPC
// server. Every server that serves Grapnel's handlers needs them; they
// chain after any interceptor set otherwise.
func StatusInterceptors() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(UnaryStatus), grpc.ChainStreamInterceptor(StreamStatus)}
}
