// Package identity reads who a peer is from its verified certificate.
//
// Every Grapnel certificate names one identity in a URI SAN of the form
// grapnel://ROLE/NAME, ROLE one of replica, agent, operator or commander:
// a replica's NAME is its Raft server id, an agent's its agent name, an
// operator's or a commander's the person or program. Ankaios-made
// certificates carry no such URI ("untyped"): their DNS SANs are agent
// names, as upstream reads them, and the server gives them the role its
// operator configured for them. Rights per role live with the server
// (rpc/authz); this package only says who.
package identity
