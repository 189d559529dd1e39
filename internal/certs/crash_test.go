package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/durable"
	"github.com/grapnel-io/grapnel/internal/durable/crashfs"
)

// A power cut while `grapnel certs ca` writes leaves each file missing or
// whole: the CA loads, or fails naming a file that is not there, never
// one that is empty or torn. Once the write returned, it loads.
func TestCACrashSafe(t *testing.T) {
	key, der, err := sign(&x509.Certificate{Subject: pkix.Name{CommonName: "Grapnel CA"}, NotBefore: now, NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	crashfs.Check(t, crashfs.Sequence{
		Seed: func(m *crashfs.FS) { m.SeedDir("/etc") },
		Run:  func(m *crashfs.FS) error { return writeCA(durable.On(m), "/etc/ca", key, der) },
		Check: func(c crashfs.Crash) error {
			cert, got, _, err := loadCA(c.Path("/etc/ca"))
			switch {
			case err != nil && (c.Done || !errors.Is(err, fs.ErrNotExist)):
				return err
			case err != nil:
				return nil
			case !bytes.Equal(cert.Raw, der) || !got.Equal(key):
				return errors.New("the CA loaded is not the one written")
			}
			return nil
		},
	})
}

// The same for an issued certificate: its key, certificate and the CA's
// copy are each missing or whole, and the pair loads once the write
// returned.
func TestIssuedCrashSafe(t *testing.T) {
	key, der, err := sign(&x509.Certificate{Subject: pkix.Name{CommonName: "r1"}, NotBefore: now, NotAfter: now.Add(time.Hour)}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	caPEM := []byte("-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n")
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{
		Key:    pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		Cert:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		CACert: caPEM,
	}
	crashfs.Check(t, crashfs.Sequence{
		Seed: func(m *crashfs.FS) { m.SeedDir("/etc/r1") },
		Run:  func(m *crashfs.FS) error { return writeIssued(durable.On(m), "/etc/r1", key, der, caPEM) },
		Check: func(c crashfs.Crash) error {
			for _, f := range []string{Key, Cert, CACert} {
				data, err := os.ReadFile(c.Path("/etc/r1/" + f))
				switch {
				case errors.Is(err, fs.ErrNotExist) && !c.Done:
				case err != nil:
					return err
				case !bytes.Equal(data, want[f]):
					return fmt.Errorf("%s is empty or torn: %q", f, data)
				}
			}
			if !c.Done {
				return nil
			}
			pair, err := tls.LoadX509KeyPair(c.Path("/etc/r1/"+Cert), c.Path("/etc/r1/"+Key))
			if err != nil {
				return err
			}
			if !bytes.Equal(pair.Certificate[0], der) {
				return errors.New("the certificate loaded is not the one written")
			}
			return nil
		},
	})
}
