// Package access turns MongoDB's refusals (a wrong password, a role missing for a command,
// an untrusted or misnamed server certificate, TLS on one side only) into one line that says
// what is wrong and what to change. The driver's own errors nest a connection error in a
// server-selection error that prints the whole topology; the cause is a fragment of it.
package access

import (
	"errors"
	"regexp"
	"strings"

	"go.mongodb.org/mongo-driver/v2/mongo"
)

// Kind is what was refused.
type Kind int

const (
	AuthenticationFailed Kind = iota + 1 // wrong user or password, or the wrong authSource
	Unauthorized                         // logged in, but a role is missing
	UntrustedCertificate                 // the server's certificate is not signed by a trusted CA
	CertificateHost                      // the certificate does not name the host dialled
	TLSMismatch                          // one side speaks TLS and the other does not
)

// Error is a refusal explained in one line; the driver's error stays reachable (errors.As).
type Error struct {
	Kind Kind
	Line string
	Err  error
}

func (e *Error) Error() string { return e.Line }
func (e *Error) Unwrap() error { return e.Err }

// Explain returns err as an *Error when it is a refusal of access, and err unchanged
// otherwise (nil stays nil).
func Explain(err error) error {
	if err == nil {
		return nil
	}
	var done *Error
	if errors.As(err, &done) {
		return err
	}
	text := err.Error()
	var se mongo.ServerError
	isServer := errors.As(err, &se)
	switch {
	case isServer && se.HasErrorCode(codeUnauthorized):
		return &Error{Kind: Unauthorized, Line: unauthorized(text), Err: err}
	case isServer && se.HasErrorCode(codeAuthenticationFailed), strings.Contains(text, "AuthenticationFailed"):
		return &Error{Kind: AuthenticationFailed, Err: err, Line: "mongodb: authentication failed: wrong user name or password, " +
			"or the user is not defined in the authentication database (authSource in the URI; shardmart's users are in admin)"}
	case strings.Contains(text, "x509: certificate is valid for"), strings.Contains(text, "x509: cannot validate certificate for"):
		return &Error{Kind: CertificateHost, Err: err, Line: "mongodb: TLS: the server's certificate does not name the host dialled (" +
			fragment(text, "x509: ") + "): connect by a name or address the certificate holds, or reissue it with that one"}
	case strings.Contains(text, "x509: "):
		return &Error{Kind: UntrustedCertificate, Err: err, Line: "mongodb: TLS: the server's certificate is not trusted (" +
			fragment(text, "x509: ") + "): name the CA that signed it with tlsCAFile=<PEM file> in the connection string"}
	case strings.Contains(text, "first record does not look like a TLS handshake"):
		return &Error{Kind: TLSMismatch, Err: err, Line: "mongodb: TLS: the server does not speak TLS: remove tls=true from the connection string, or start the server with TLS"}
	case (strings.Contains(text, "error occurred during connection handshake") || strings.Contains(text, "server selection error")) &&
		strings.Contains(text, "incomplete read of message header") && strings.Contains(text, "EOF"):
		// A requireTLS server closes a plain connection without a word, and so does one that
		// wants client certificates to a TLS client without one (and a server shutting down,
		// hence the "if"s). Only when a new connection's handshake, or the server monitor's
		// (server selection then gives up with it as the server's last error), met it: an EOF
		// on a pooled connection is a server gone, not a refusal.
		return &Error{Kind: TLSMismatch, Err: err, Line: "mongodb: the server closed the connection during the handshake: " +
			"if it requires TLS, add tls=true (and tlsCAFile=<PEM file>) to the connection string; " +
			"if it requires client certificates, add tlsCertificateKeyFile=<PEM file>"}
	}
	return err
}

// Refusal is Explain's *Error when err is a refusal of access.
func Refusal(err error) (*Error, bool) {
	var refused *Error
	ok := errors.As(Explain(err), &refused)
	return refused, ok
}

// Certain tells whether the refusal cannot also be a server going away: a TLS mismatch shows
// only as a connection closed during the handshake, which a server shutting down gives too.
func (e *Error) Certain() bool { return e.Kind != TLSMismatch }

const (
	codeUnauthorized         = 13
	codeAuthenticationFailed = 18
)

// notAuthorized is the server's wording: "not authorized on <db> to execute command { <cmd>: …".
var notAuthorized = regexp.MustCompile(`not authorized on (\S+) to execute command \{ ?"?([A-Za-z_$]+)"?:(.*)`)

// clusterCommands need clusterMonitor (admin) rather than a role on one database.
var clusterCommands = map[string]bool{
	"replSetGetStatus": true, "serverStatus": true, "currentOp": true, "listShards": true, "getShardMap": true,
	"top": true, "hostInfo": true, "getCmdLineOpts": true, "connPoolStats": true, "shardConnPoolStats": true,
	"balancerStatus": true, "getParameter": true, "listDatabases": true,
}

// readCommands need read on their database; every other command there needs readWrite.
var readCommands = map[string]bool{
	"find": true, "aggregate": true, "count": true, "distinct": true, "listCollections": true,
	"listIndexes": true, "collStats": true, "dbStats": true, "getMore": true,
}

// unauthorized names the command refused and the built-in role that grants it.
func unauthorized(text string) string {
	m := notAuthorized.FindStringSubmatch(text)
	if m == nil {
		return "mongodb: not authorized (a role is missing): " + clip(text)
	}
	db, cmd := m[1], m[2]
	if strings.HasPrefix(cmd, "_configsvr") || strings.HasPrefix(cmd, "_shardsvr") {
		return "mongodb: not authorized to run " + cmd + " on " + db + ": an internal command, which only cluster members " +
			"(the keyFile's identity) may send; connect through a mongos, which sends it for you"
	}
	return "mongodb: not authorized to run " + cmd + " on " + db + ": the user needs " + roleFor(db, cmd, m[3])
}

// roleFor is the least built-in role that allows cmd on db, as docs/mongodb.md lists them.
func roleFor(db, cmd, rest string) string {
	switch {
	case clusterCommands[cmd], db == "admin" && cmd == "aggregate" && strings.Contains(rest, "$currentOp"):
		return "the clusterMonitor role (on admin)"
	case readCommands[cmd]:
		return "the read role on " + db + " (or readWrite)"
	default:
		return "the readWrite role on " + db
	}
}

// fragment is the part of text from marker to the end of its clause.
func fragment(text, marker string) string {
	i := strings.Index(text, marker)
	if i < 0 {
		return ""
	}
	s := text[i:]
	if j := strings.IndexAny(s, ",;}]\n"); j > 0 {
		s = s[:j]
	}
	return strings.TrimSpace(s)
}

func clip(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
