package rpc

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
)

// testPKI is a throwaway CA with certificates written to a temp dir.
type testPKI struct {
	dir    string
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	serial int64
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir(), serial: 1}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(p.serial),
		Subject:               pkix.Name{CommonName: "test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if p.caCert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	p.caKey = key
	writePEM(t, filepath.Join(p.dir, "ca.pem"), "CERTIFICATE", der, 0o644)
	return p
}

// issue writes name.pem and name-key.pem for a leaf with the SAN DNS names.
func (p *testPKI) issue(t *testing.T, name string, dnsNames ...string) TLSFiles {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     dnsNames,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	f := TLSFiles{CA: filepath.Join(p.dir, "ca.pem"), Cert: filepath.Join(p.dir, name+".pem"), Key: filepath.Join(p.dir, name+"-key.pem")}
	writePEM(t, f.Cert, "CERTIFICATE", der, 0o644)
	writePEM(t, f.Key, "PRIVATE KEY", keyDER, 0o600)
	return f
}

func writePEM(t *testing.T, path, typ string, der []byte, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil { // umask-proof
		t.Fatal(err)
	}
}

// echoNames answers the first message with the peer's certificate names.
type echoNames struct {
	grpcapi.UnimplementedCliConnectionServer
}

func (echoNames) ConnectCli(s grpc.BidiStreamingServer[grpcapi.ToServer, grpcapi.FromServer]) error {
	if _, err := s.Recv(); err != nil {
		return err
	}
	var names []string
	if p, ok := peer.FromContext(s.Context()); ok {
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(info.State.VerifiedChains) > 0 {
			names = info.State.VerifiedChains[0][0].DNSNames
		}
	}
	return s.Send(&grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_Response{
		Response: &ankbase.Response{RequestId: strings.Join(names, ",")},
	}})
}

func startTLSServer(t *testing.T, f TLSFiles) string {
	t.Helper()
	cfg, err := ServerTLSConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(cfg)))
	grpcapi.RegisterCliConnectionServer(srv, echoNames{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return lis.Addr().String()
}

// askNames opens a stream with cfg and returns the names the server saw.
func askNames(t *testing.T, addr string, cfg *tls.Config) (string, error) {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := grpcapi.NewCliConnectionClient(cc).ConnectCli(ctx)
	if err != nil {
		return "", err
	}
	if err := stream.Send(&grpcapi.ToServer{}); err != nil {
		return "", err
	}
	msg, err := stream.Recv()
	if err != nil {
		return "", err
	}
	return msg.GetResponse().GetRequestId(), nil
}

// handshake dials addr with cfg and reads once, so that a refusal by the
// server is seen as well as one by the client: in TLS 1.3 the server
// checks the client's certificate after the client's handshake returned,
// and sends its alert on the connection. A gRPC call sees that alert, or
// a broken pipe when it wrote first, so the refusal tests look here for
// the reason.
func handshake(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	cfg = cfg.Clone()
	cfg.NextProtos = []string{"h2"}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(clock.Real().Now().Add(10 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	return err
}

// wantAlert fails t unless err is the server's TLS alert named alert.
func wantAlert(t *testing.T, err error, alert string) {
	t.Helper()
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "remote error" || op.Err == nil || op.Err.Error() != alert {
		t.Fatalf("handshake error %v, want the server's alert %q", err, alert)
	}
}

func TestMutualTLS(t *testing.T) {
	pki := newTestPKI(t)
	addr := startTLSServer(t, pki.issue(t, "server", ServerName))

	t.Run("client with certificate", func(t *testing.T) {
		cfg, err := ClientTLSConfig(pki.issue(t, "agent", "agent_A", "agent_B"), "")
		if err != nil {
			t.Fatal(err)
		}
		names, err := askNames(t, addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if names != "agent_A,agent_B" {
			t.Fatalf("server saw names %q", names)
		}
	})
	t.Run("client without certificate is refused", func(t *testing.T) {
		full, err := ClientTLSConfig(pki.issue(t, "nocert", "x"), ServerName)
		if err != nil {
			t.Fatal(err)
		}
		full.Certificates = nil
		if names, err := askNames(t, addr, full); err == nil {
			t.Fatalf("accepted a client without certificate (names %q)", names)
		}
		wantAlert(t, handshake(t, addr, full), "tls: certificate required")
	})
	t.Run("client certificate from another CA is refused", func(t *testing.T) {
		other := newTestPKI(t)
		cfg, err := ClientTLSConfig(other.issue(t, "stranger", "agent_A"), ServerName)
		if err != nil {
			t.Fatal(err)
		}
		ours, err := ClientTLSConfig(pki.issue(t, "ours", "x"), ServerName)
		if err != nil {
			t.Fatal(err)
		}
		cfg.RootCAs = ours.RootCAs // trusts the server, but its own cert is foreign
		if _, err := askNames(t, addr, cfg); err == nil {
			t.Fatal("accepted a certificate of another CA")
		}
		wantAlert(t, handshake(t, addr, cfg), "tls: unknown certificate authority")
	})
	t.Run("server name is verified", func(t *testing.T) {
		cfg, err := ClientTLSConfig(pki.issue(t, "picky", "agent_A"), "other-server")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := askNames(t, addr, cfg); err == nil {
			t.Fatal("accepted a server certificate without the expected name")
		}
		// The client refuses the server: its own check fails, on the name.
		err = handshake(t, addr, cfg)
		var verr *tls.CertificateVerificationError
		var herr x509.HostnameError
		if !errors.As(err, &verr) || !errors.As(err, &herr) || herr.Host != "other-server" {
			t.Fatalf("handshake error %v, want the certificate refused for the name other-server", err)
		}
	})
}

func TestTLSConfigSettings(t *testing.T) {
	pki := newTestPKI(t)
	f := pki.issue(t, "server", ServerName)
	srv, err := ServerTLSConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	if srv.ClientAuth != tls.RequireAndVerifyClientCert || srv.ClientCAs == nil || srv.MinVersion < tls.VersionTLS12 {
		t.Fatalf("server config too weak: %+v", srv)
	}
	cli, err := ClientTLSConfig(f, "")
	if err != nil {
		t.Fatal(err)
	}
	if cli.ServerName != ServerName || cli.RootCAs == nil || len(cli.Certificates) != 1 || cli.MinVersion < tls.VersionTLS12 {
		t.Fatalf("client config wrong: %+v", cli)
	}
}

func TestTLSConfigErrors(t *testing.T) {
	pki := newTestPKI(t)
	good := pki.issue(t, "server", ServerName)
	notPEM := filepath.Join(pki.dir, "garbage.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		f    TLSFiles
		want string
	}{
		{"no CA", TLSFiles{Cert: good.Cert, Key: good.Key}, "CA"},
		{"no cert", TLSFiles{CA: good.CA, Key: good.Key}, "certificate"},
		{"no key", TLSFiles{CA: good.CA, Cert: good.Cert}, "key"},
		{"missing file", TLSFiles{CA: good.CA, Cert: good.Cert, Key: good.Key + ".gone"}, good.Key + ".gone"},
		{"CA not PEM", TLSFiles{CA: notPEM, Cert: good.Cert, Key: good.Key}, notPEM},
		{"cert not PEM", TLSFiles{CA: good.CA, Cert: notPEM, Key: good.Key}, notPEM},
		{"key of another cert", TLSFiles{CA: good.CA, Cert: good.Cert, Key: pki.issue(t, "other").Key}, good.Cert},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for side, build := range map[string]func(TLSFiles) (*tls.Config, error){
				"server": ServerTLSConfig,
				"client": func(f TLSFiles) (*tls.Config, error) { return ClientTLSConfig(f, "") },
			} {
				if _, err := build(tc.f); err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: error %v does not mention %q", side, err, tc.want)
				}
			}
		})
	}
}

func TestCheckPEMPermissions(t *testing.T) {
	pki := newTestPKI(t)
	f := pki.issue(t, "server", ServerName)
	tests := []struct {
		name     string
		certPerm os.FileMode
		keyPerm  os.FileMode
		reason   string // empty: accepted
	}{
		{"usual", 0o644, 0o600, ""},
		{"read-only key", 0o444, 0o400, ""},
		{"owner-only cert", 0o400, 0o600, ""},
		{"key readable by group", 0o644, 0o640, "private key"},
		{"key readable by all", 0o644, 0o644, "private key"},
		{"key executable", 0o644, 0o700, "private key"},
		{"key write-only", 0o644, 0o200, "private key"},
		{"cert group-writable", 0o664, 0o600, "writable by group or others"},
		{"cert world-writable", 0o646, 0o600, "writable by group or others"},
		{"cert executable", 0o744, 0o600, "executable"},
		{"cert not readable by owner", 0o044, 0o600, "readable by its owner"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.Chmod(f.Cert, tc.certPerm); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(f.Key, tc.keyPerm); err != nil {
				t.Fatal(err)
			}
			err := CheckPEMPermissions(f)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrPEMPermissions) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("error %v, want one about %q", err, tc.reason)
			}
			file := f.Cert
			if tc.reason == "private key" {
				file = f.Key
			}
			if !strings.Contains(err.Error(), file) {
				t.Errorf("error %v does not name %s", err, file)
			}
		})
	}
	if err := CheckPEMPermissions(TLSFiles{}); err != nil {
		t.Fatalf("no files: %v", err)
	}
	if err := CheckPEMPermissions(TLSFiles{Key: filepath.Join(pki.dir, "absent")}); err == nil {
		t.Fatal("a missing file passed")
	}
}

func TestTLSFilesEmpty(t *testing.T) {
	if !(TLSFiles{}).Empty() || (TLSFiles{Key: "k"}).Empty() {
		t.Fatal("Empty is wrong")
	}
}
