// Package tlsreload keeps one side's TLS material (own certificate and
// key, the CA pool) in memory and swaps it atomically when the files
// change, so that certificates rotate without a restart. The tls.Configs
// it builds read the current material at each handshake (GetCertificate,
// GetClientCertificate, GetConfigForClient, VerifyConnection): a new
// connection presents and checks against the new files, a connection
// already open keeps the certificates it was made with until it closes.
// A reload that fails (a file missing, unreadable, with loose
// permissions, or a certificate that does not match its key) keeps the
// old material and reports the error naming the file.
package tlsreload
