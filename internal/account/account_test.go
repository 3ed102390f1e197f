package account

import (
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// An unknown e-mail must cost one bcrypt comparison at the cost real hashes use, or the
// answer time tells which accounts exist.
func TestUnknownEmailCostsTheSameAsAKnownOne(t *testing.T) {
	real, err := HashPassword("password123")
	if err != nil {
		t.Fatal(err)
	}
	want, err := bcrypt.Cost([]byte(real))
	if err != nil {
		t.Fatal(err)
	}
	got, err := bcrypt.Cost(dummyHash())
	if err != nil || got != want {
		t.Errorf("dummy hash cost %d (%v), real hashes cost %d", got, err, want)
	}
}
