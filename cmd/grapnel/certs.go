package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/grapnel-io/grapnel/internal/certs"
	"github.com/grapnel-io/grapnel/internal/identity"
)

// defaultCAValidity and defaultCertValidity are the --validity defaults:
// a CA outlives many rotations of the certificates it signs.
const (
	defaultCAValidity   = 10 * 365 * 24 * time.Hour
	defaultCertValidity = 365 * 24 * time.Hour
)

// newCerts is `grapnel certs ca|issue`: it makes a CA and the
// certificates of each role locally, without a cluster (Grapnel only;
// docs/security.md).
func newCerts(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "certs", Short: "Make a CA and a certificate per identity: replica, agent, operator or commander (Grapnel only)"}
	var out string
	validity := defaultCAValidity
	ca := &cobra.Command{
		Use:   "ca --out DIR",
		Short: "Make a CA: DIR/ca.pem and DIR/ca-key.pem (keep the key off the vehicle)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := certs.NewCA(out, time.Now(), validity); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "CA written to %s (%s, key %s)\n", out, certs.CACert, certs.CAKey)
			return nil
		},
	}
	ca.Flags().StringVar(&out, "out", "", "directory to write the CA into (created 0700)")
	ca.Flags().DurationVar(&validity, "validity", defaultCAValidity, "how long the CA is valid")
	_ = ca.MarkFlagRequired("out")

	var caDir, role, name string
	certValidity := defaultCertValidity
	issue := &cobra.Command{
		Use:   "issue --ca DIR --role ROLE --name NAME --out DIR",
		Short: "Issue a certificate naming one identity (grapnel://ROLE/NAME): DIR/cert.pem, DIR/key.pem and a copy of ca.pem",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := identity.ParseRole(role)
			if err != nil {
				return fmt.Errorf("--role: %w", err)
			}
			if err := certs.Issue(caDir, out, certs.Request{Role: r, Name: name, Validity: certValidity}, time.Now()); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%s %s: %s, %s, %s\n", r, name, filepath.Join(out, certs.Cert), filepath.Join(out, certs.Key), filepath.Join(out, certs.CACert))
			return nil
		},
	}
	issue.Flags().StringVar(&caDir, "ca", "", "directory of the CA (grapnel certs ca)")
	issue.Flags().StringVar(&role, "role", "", "replica (its server id), agent (its agent name), operator (administers the cluster) or commander (reads and changes the desired state)")
	issue.Flags().StringVar(&name, "name", "", "the replica id, agent name, or the operator's or commander's name")
	issue.Flags().StringVar(&out, "out", "", "directory to write the certificate into (created 0700)")
	issue.Flags().DurationVar(&certValidity, "validity", defaultCertValidity, "how long the certificate is valid (at most until the CA expires)")
	for _, f := range []string{"ca", "role", "name", "out"} {
		_ = issue.MarkFlagRequired(f)
	}
	cmd.AddCommand(ca, issue)
	return cmd
}
