package intruder

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

// dial is a client connection to addr with the certificate in f.
func dial(addr string, f rpc.TLSFiles) (*grpc.ClientConn, error) { return dialFrom(addr, f, "") }

// dialFrom is dial with the connections leaving from source ("": the
// system chooses).
func dialFrom(addr string, f rpc.TLSFiles, source string) (*grpc.ClientConn, error) {
	tc, err := clientTLS(f)
	if err != nil {
		return nil, err
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tc))}
	if source != "" {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}
		opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", a)
		}))
	}
	return grpc.NewClient(addr, opts...)
}

// session is a commander's Ankaios stream (CLI) to one replica, on which
// requests are answered one at a time.
type session struct {
	st     wire.Stream
	cancel context.CancelFunc
	n      int
}

// openSession opens a CLI stream on cc within d, with the outgoing
// metadata md (key, value, ...), and says CommanderHello.
func openSession(ctx context.Context, cc *grpc.ClientConn, d time.Duration, md ...string) (*session, error) {
	sctx, cancel := context.WithTimeout(ctx, d)
	if len(md) > 0 {
		sctx = metadata.AppendToOutgoingContext(sctx, md...)
	}
	st, err := wire.KindCLI.Open(sctx, cc)
	if err != nil {
		cancel()
		return nil, err
	}
	if err := st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_CommanderHello{
		CommanderHello: &grpcapi.CommanderHello{ProtocolVersion: rpc.ProtocolVersion}}}); err != nil {
		cancel()
		return nil, recvErr(st, err)
	}
	return &session{st: st, cancel: cancel}, nil
}

func (s *session) close() { s.cancel() }

// send sends req under a fresh request id and returns the id.
func (s *session) send(req *ankbase.Request) (string, error) {
	s.n++
	req.RequestId = fmt.Sprintf("intruder-%d", s.n)
	err := s.st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: req}})
	if err != nil {
		return "", recvErr(s.st, err)
	}
	return req.RequestId, nil
}

// await reads until the response to id; broadcasts and other answers
// are passed over.
func (s *session) await(id string) (*ankbase.Response, error) {
	for {
		m, err := s.st.Recv()
		if err != nil {
			return nil, err
		}
		if r := m.GetResponse(); r != nil && r.GetRequestId() == id {
			return r, nil
		}
	}
}

// request sends req and waits for its answer.
func (s *session) request(req *ankbase.Request) (*ankbase.Response, error) {
	id, err := s.send(req)
	if err != nil {
		return nil, err
	}
	return s.await(id)
}

// recvErr is the status a stream ended with when a Send failed: gRPC
// reports the reason on Recv, Send says only io.EOF.
func recvErr(st wire.Stream, sendErr error) error {
	if _, err := st.Recv(); err != nil {
		return err
	}
	return sendErr
}

// refusedWith reports whether err is a gRPC status of one of the codes.
func refusedWith(err error, want ...codes.Code) bool {
	if err == nil {
		return false
	}
	got := status.Code(err)
	for _, w := range want {
		if got == w {
			return true
		}
	}
	return false
}

// reason is the ErrorInfo reason a status carries, or "".
func reason(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}

// publicCert is a certificate the intruder holds without its key: its
// identity and its DER, as a proxy forwards it (wire.ForwardedCertKey).
type publicCert struct {
	id  identity.Identity
	der string
}

// readCert reads the first certificate of a PEM file.
func readCert(path string) (*x509.Certificate, error) {
	if path == "" {
		return nil, errors.New("no certificate given")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("%s: no PEM block", path)
	}
	return x509.ParseCertificate(blk.Bytes)
}

func loadPublicCert(path string) (publicCert, error) {
	c, err := readCert(path)
	if err != nil {
		return publicCert{}, err
	}
	id, err := identity.FromCert(c, identity.None)
	if err != nil {
		return publicCert{}, fmt.Errorf("%s: %w", path, err)
	}
	return publicCert{id: id, der: base64.StdEncoding.EncodeToString(c.Raw)}, nil
}

// certName is the identity of the certificate in f.
func certName(f rpc.TLSFiles) (identity.Identity, error) {
	c, err := readCert(f.Cert)
	if err != nil {
		return identity.Identity{}, err
	}
	id, err := identity.FromCert(c, identity.None)
	if err != nil {
		return identity.Identity{}, err
	}
	id.Serial = strings.ToLower(c.SerialNumber.Text(16))
	return id, nil
}
