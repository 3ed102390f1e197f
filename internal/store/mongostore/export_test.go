package mongostore

import "testing"

// URIForTest gives the external tests (package mongostore_test) the replica set TestMain
// started, failing the test if there is none.
func URIForTest(t testing.TB) string {
	t.Helper()
	if testSetupErr != nil {
		t.Fatal(testSetupErr)
	}
	return testURI
}
