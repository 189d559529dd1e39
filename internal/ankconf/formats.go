package ankconf

// The keys of the Ankaios v1 config files (Ankaios' own documentation:
// doc/docs/reference/config-files.md; the keys are those of the server's,
// the agent's and the CLI's config structs). Every file states
// version = "v1" besides.

// pemKeys are the TLS keys all three files share: a PEM file's path or its
// content, not both.
func pemKeys() []Key {
	return []Key{
		{Name: "ca_pem", Kind: String}, {Name: "crt_pem", Kind: String}, {Name: "key_pem", Kind: String},
		{Name: "ca_pem_content", Kind: String}, {Name: "crt_pem_content", Kind: String}, {Name: "key_pem_content", Kind: String},
	}
}

var pemExclusive = [][2]string{{"ca_pem", "ca_pem_content"}, {"crt_pem", "crt_pem_content"}, {"key_pem", "key_pem_content"}}

// Server is ank-server.conf (default /etc/ankaios/ank-server.conf).
var Server = Format{
	What: "Ankaios server config",
	Keys: append([]Key{
		{Name: "startup_manifest", Kind: String},
		{Name: "address", Kind: String},
		{Name: "insecure", Kind: Bool},
		{Name: "mutating_hooks", Kind: Any, Unsupported: "Grapnel runs no mutating hooks; workloads are stored as the updates give them"},
	}, pemKeys()...),
	Exclusive: pemExclusive,
}

// Agent is ank-agent.conf (default /etc/ankaios/ank-agent.conf).
var Agent = Format{
	What: "Ankaios agent config",
	Keys: append([]Key{
		{Name: "name", Kind: String},
		{Name: "server_url", Kind: String},
		{Name: "run_folder", Kind: String},
		{Name: "insecure", Kind: Bool},
		{Name: "runtimes", Kind: StringList},
		{Name: "tags", Kind: StringTable},
	}, pemKeys()...),
	Exclusive: pemExclusive,
}

// CLI is ank.conf (default $HOME/.config/ankaios/ank.conf, then
// /etc/ankaios/ank.conf). Its keys may also stand in the [default] table.
var CLI = Format{
	What: "Ankaios CLI config",
	Keys: append([]Key{
		{Name: "response_timeout", Kind: Uint},
		{Name: "verbose", Kind: Bool},
		{Name: "quiet", Kind: Bool},
		{Name: "no_wait", Kind: Bool},
		{Name: "server_url", Kind: String},
		{Name: "insecure", Kind: Bool},
	}, pemKeys()...),
	Section:   "default",
	Exclusive: pemExclusive,
}

// Default paths of the Ankaios config files.
const (
	ServerPath    = "/etc/ankaios/ank-server.conf"
	AgentPath     = "/etc/ankaios/ank-agent.conf"
	CLISystemPath = "/etc/ankaios/ank.conf"
	// CLIUserPath is under $HOME and read before CLISystemPath.
	CLIUserPath = ".config/ankaios/ank.conf"
)
