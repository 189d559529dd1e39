package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/grapnel-io/grapnel/rpc"
)

// defaultConfigPath is where the server looks for its config file.
const defaultConfigPath = "/etc/grapnel/server.yaml"

// config is the server's start-up configuration. It is assembled from the
// config file, then environment variables, then the command line; a later
// source wins (swdd~server-loads-config-file~1).
type config struct {
	StartupManifest string `yaml:"startup_manifest"`
	Address         string `yaml:"address"`
	Name            string `yaml:"name"`
	DataDir         string `yaml:"data_dir"`
	RaftAddress     string `yaml:"raft_address"`
	Insecure        bool   `yaml:"insecure"`
	CAPem           string `yaml:"ca_pem"`
	CrtPem          string `yaml:"crt_pem"`
	KeyPem          string `yaml:"key_pem"`
	LogLevel        string `yaml:"log_level"`
}

func defaults() config {
	return config{
		Address:     "127.0.0.1:25551",
		Name:        "server-1",
		DataDir:     "/var/lib/grapnel",
		RaftAddress: "127.0.0.1:25561",
		LogLevel:    "info",
	}
}

// envPrefix prefixes every environment variable of the server.
const envPrefix = "GRAPNEL_SERVER_"

// loadConfig resolves the configuration from args, the environment
// (lookup) and the config file.
func loadConfig(args []string, lookup func(string) (string, bool)) (config, error) {
	fs := pflag.NewFlagSet("grapnel-server", pflag.ContinueOnError)
	fs.SortFlags = false
	var cli config
	configPath := fs.StringP("server-config", "x", "", "server config file (YAML; default "+defaultConfigPath+" if present)")
	fs.StringVarP(&cli.StartupManifest, "startup-manifest", "m", "", "manifest loaded into a fresh cluster")
	fs.StringVarP(&cli.Address, "address", "a", "", "gRPC address (default 127.0.0.1:25551)")
	fs.StringVar(&cli.Name, "name", "", "replica id (default server-1)")
	fs.StringVar(&cli.DataDir, "data-dir", "", "Raft log, stable store and snapshots (default /var/lib/grapnel)")
	fs.StringVar(&cli.RaftAddress, "raft-address", "", "Raft transport address (default 127.0.0.1:25561)")
	fs.BoolVarP(&cli.Insecure, "insecure", "k", false, "serve without TLS (development only)")
	fs.StringVar(&cli.CAPem, "ca_pem", "", "CA certificate (PEM)")
	fs.StringVar(&cli.CrtPem, "crt_pem", "", "server certificate (PEM)")
	fs.StringVar(&cli.KeyPem, "key_pem", "", "server key (PEM)")
	fs.StringVar(&cli.LogLevel, "log-level", "", "debug, info, warn or error (default info)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}

	cfg := defaults()
	path, explicit := *configPath, fs.Changed("server-config")
	if !explicit {
		if v, ok := lookup(envPrefix + "CONFIG"); ok {
			path, explicit = v, true
		} else {
			path = defaultConfigPath
		}
	}
	if err := readConfigFile(path, explicit, &cfg); err != nil {
		return config{}, err
	}
	if err := applyEnv(&cfg, lookup); err != nil {
		return config{}, err
	}
	set := func(name string, dst *string, v string) {
		if fs.Changed(name) {
			*dst = v
		}
	}
	set("startup-manifest", &cfg.StartupManifest, cli.StartupManifest)
	set("address", &cfg.Address, cli.Address)
	set("name", &cfg.Name, cli.Name)
	set("data-dir", &cfg.DataDir, cli.DataDir)
	set("raft-address", &cfg.RaftAddress, cli.RaftAddress)
	set("ca_pem", &cfg.CAPem, cli.CAPem)
	set("crt_pem", &cfg.CrtPem, cli.CrtPem)
	set("key_pem", &cfg.KeyPem, cli.KeyPem)
	set("log-level", &cfg.LogLevel, cli.LogLevel)
	if fs.Changed("insecure") {
		cfg.Insecure = cli.Insecure
	}
	return cfg, cfg.validate()
}

func readConfigFile(path string, explicit bool, cfg *config) error {
	data, err := os.ReadFile(path)
	if err != nil {
		if !explicit && errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("server config %s: %w", path, err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && err.Error() != "EOF" {
		return fmt.Errorf("server config %s: %w", path, err)
	}
	return nil
}

func applyEnv(cfg *config, lookup func(string) (string, bool)) error {
	str := map[string]*string{
		"STARTUP_MANIFEST": &cfg.StartupManifest, "ADDRESS": &cfg.Address, "NAME": &cfg.Name,
		"DATA_DIR": &cfg.DataDir, "RAFT_ADDRESS": &cfg.RaftAddress, "CA_PEM": &cfg.CAPem,
		"CRT_PEM": &cfg.CrtPem, "KEY_PEM": &cfg.KeyPem, "LOG_LEVEL": &cfg.LogLevel,
	}
	for k, dst := range str {
		if v, ok := lookup(envPrefix + k); ok {
			*dst = v
		}
	}
	if v, ok := lookup(envPrefix + "INSECURE"); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%sINSECURE: %q is not a boolean", envPrefix, v)
		}
		cfg.Insecure = b
	}
	return nil
}

// errNoSecurityMode is the refusal to start without an explicit choice of
// mTLS or insecure mode.
var errNoSecurityMode = errors.New("missing certificate files: give --ca_pem, --crt_pem and --key_pem " +
	"(or GRAPNEL_SERVER_CA_PEM, ...), or choose insecure mode explicitly with --insecure/-k")

// validate checks the combination of options.
//
// swdd~server-fails-on-missing-file-paths-and-insecure-cli-arguments~1
func (c config) validate() error {
	files := c.tlsFiles()
	if !c.Insecure {
		if c.CAPem == "" || c.CrtPem == "" || c.KeyPem == "" {
			return errNoSecurityMode
		}
		if err := rpc.CheckPEMPermissions(files); err != nil {
			return err
		}
	}
	if c.Name == "" || !validID(c.Name) {
		return fmt.Errorf("--name %q: a replica id uses only [a-zA-Z0-9_-]", c.Name)
	}
	return nil
}

func (c config) tlsFiles() rpc.TLSFiles {
	return rpc.TLSFiles{CA: c.CAPem, Cert: c.CrtPem, Key: c.KeyPem}
}

func validID(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return s != ""
}
