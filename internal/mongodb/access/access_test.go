package access

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/mongo"
)

// The server's Unauthorized wording becomes the command, the database and the built-in role
// that grants it. (The live refusals are in internal/store/mongostore and mongocollect.)
func TestUnauthorizedNamesTheRole(t *testing.T) {
	for _, c := range []struct{ msg, want string }{
		{`not authorized on admin to execute command { replSetGetStatus: 1, $db: "admin" }`,
			"mongodb: not authorized to run replSetGetStatus on admin: the user needs the clusterMonitor role (on admin)"},
		{`not authorized on admin to execute command { aggregate: 1, pipeline: [ { $currentOp: { allUsers: true } } ] }`,
			"mongodb: not authorized to run aggregate on admin: the user needs the clusterMonitor role (on admin)"},
		{`not authorized on config to execute command { find: "shards", filter: {} }`,
			"mongodb: not authorized to run find on config: the user needs the read role on config (or readWrite)"},
		{`not authorized on shop to execute command { insert: "carts", ordered: true }`,
			"mongodb: not authorized to run insert on shop: the user needs the readWrite role on shop"},
		{`not authorized on admin to execute command { _configsvrBalancerStatus: 1, $db: "admin" }`,
			"mongodb: not authorized to run _configsvrBalancerStatus on admin: an internal command, which only cluster members " +
				"(the keyFile's identity) may send; connect through a mongos, which sends it for you"},
		{`something else entirely`, "mongodb: not authorized (a role is missing): open: (Unauthorized) something else entirely"},
	} {
		err := fmt.Errorf("open: %w", mongo.CommandError{Code: codeUnauthorized, Name: "Unauthorized", Message: c.msg})
		got := Explain(err)
		var refused *Error
		if !errors.As(got, &refused) || refused.Kind != Unauthorized || got.Error() != c.want {
			t.Errorf("Explain(%q) = %v, want %q", c.msg, got, c.want)
		}
		var ce mongo.CommandError
		if !errors.As(got, &ce) {
			t.Errorf("the driver's error is not reachable through %v", got)
		}
	}
}

// Anything that is not a refusal of access comes back unchanged.
func TestOtherErrorsUnchanged(t *testing.T) {
	for _, err := range []error{nil, io.EOF, fmt.Errorf("insert: %w", mongo.CommandError{Code: 11000, Message: "E11000 duplicate key"})} {
		if got := Explain(err); got != err {
			t.Errorf("Explain(%v) = %v, want it unchanged", err, got)
		}
	}
}

// Each refusal the driver reports, in its own wording, is one line of its kind; an EOF on a
// pooled connection (a server killed or stepping down) is not a refusal and stays as it is.
func TestRefusalKinds(t *testing.T) {
	const sel = "server selection error: context deadline exceeded, current topology: { Type: Single, Servers: [{ Addr: 127.0.0.1:27017, Type: Unknown, Last error: "
	for _, c := range []struct {
		name string
		err  error
		kind Kind // 0: not a refusal, returned unchanged
		line string
	}{
		{"wrong password", mongo.CommandError{Code: codeAuthenticationFailed, Name: "AuthenticationFailed", Message: "Authentication failed."},
			AuthenticationFailed, "mongodb: authentication failed: wrong user name or password"},
		{"wrong password in a handshake", errors.New("connection() error occurred during connection handshake: auth error: " +
			"sasl conversation error: unable to authenticate using mechanism \"SCRAM-SHA-256\": (AuthenticationFailed) Authentication failed."),
			AuthenticationFailed, "mongodb: authentication failed: wrong user name or password"},
		{"unknown authority", errors.New(sel + "tls: failed to verify certificate: x509: certificate signed by unknown authority }, ] }"),
			UntrustedCertificate, "mongodb: TLS: the server's certificate is not trusted (x509: certificate signed by unknown authority)"},
		{"host not named", errors.New(sel + "tls: failed to verify certificate: x509: certificate is valid for 127.0.0.1, not 127.0.0.2 }, ] }"),
			CertificateHost, "mongodb: TLS: the server's certificate does not name the host dialled (x509: certificate is valid for 127.0.0.1"},
		{"no IP SAN", errors.New(sel + "tls: failed to verify certificate: x509: cannot validate certificate for 127.0.0.2 because it doesn't contain any IP SANs }, ] }"),
			CertificateHost, "mongodb: TLS: the server's certificate does not name the host dialled (x509: cannot validate certificate for 127.0.0.2"},
		{"plain server", errors.New(sel + "tls: first record does not look like a TLS handshake }, ] }"),
			TLSMismatch, "mongodb: TLS: the server does not speak TLS"},
		{"server monitor's EOF", errors.New(sel + "connection(127.0.0.1:27017[-168]) incomplete read of message header: connection closed unexpectedly by the other side: EOF }, ] }"),
			TLSMismatch, "mongodb: the server closed the connection during the handshake"},
		{"handshake EOF", errors.New(sel + "connection() error occurred during connection handshake: incomplete read of message header: EOF }, ] }"),
			TLSMismatch, "mongodb: the server closed the connection during the handshake"},
		{"pooled connection EOF", errors.New("connection(127.0.0.1:27017[-3]) incomplete read of message header: connection closed unexpectedly by the other side: EOF"),
			0, ""},
	} {
		got := Explain(c.err)
		refused, ok := Refusal(c.err)
		switch {
		case c.kind == 0 && (got != c.err || ok):
			t.Errorf("%s: Explain = %v (refusal %v), want it unchanged", c.name, got, ok)
		case c.kind != 0 && (!ok || refused.Kind != c.kind || !strings.HasPrefix(refused.Line, c.line) || strings.Contains(refused.Line, "\n")):
			t.Errorf("%s: Refusal = %+v, %v; want kind %d, one line starting %q", c.name, refused, ok, c.kind, c.line)
		case ok && refused.Certain() != (c.kind != TLSMismatch):
			t.Errorf("%s: Certain = %v", c.name, refused.Certain())
		}
	}
}
