package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

type bulkUsersAnswer struct {
	Users []bulkUserResult `json:"users"`
}

func bulkBody(password string, emails ...string) map[string]any {
	users := make([]map[string]string, len(emails))
	for i, e := range emails {
		users[i] = map[string]string{"email": e}
	}
	return map[string]any{"password": password, "users": users}
}

// Off by default: the admin gets a 404 saying how to turn it on, and nobody is created.
func TestBulkUsersOffByDefault(t *testing.T) {
	e := newEnv(t)
	body := bulkBody("bulk password", "off@example.com")
	e.must(t, http.StatusUnauthorized, req{method: "POST", path: "/v1/admin/users", body: body}).problem(t)
	p := e.must(t, http.StatusNotFound, req{method: "POST", path: "/v1/admin/users", admin: testAdminToken, body: body}).problem(t)
	if !strings.Contains(p.Detail, "--admin-bulk-users") {
		t.Errorf("the problem does not say how to turn the route on: %+v", p)
	}
	if _, err := e.stores.Users.UserByEmail(context.Background(), "off@example.com"); err == nil {
		t.Error("the refused call created a user")
	}
}

// Enabled: every user is created with one hash of the password, an existing e-mail is
// answered with its account, a repeated call creates nobody twice, and the users log in.
func TestBulkUsersCreatesOnceAndLogsIn(t *testing.T) {
	e := newEnvWith(t, func(d *Deps) { d.BulkUsers = true })
	ctx := context.Background()
	e.must(t, http.StatusCreated, req{method: "POST", path: "/v1/users", token: e.guest(t),
		body: map[string]string{"email": "known@example.com", "password": "known password"}})
	emails := []string{"known@example.com"}
	for i := range 20 {
		emails = append(emails, fmt.Sprintf("Bulk-%d@Example.com", i))
	}
	var first, again bulkUsersAnswer
	e.must(t, http.StatusOK, req{method: "POST", path: "/v1/admin/users", admin: testAdminToken,
		body: bulkBody("bulk password", emails...)}).json(t, &first)
	if len(first.Users) != len(emails) {
		t.Fatalf("got %d results, want %d", len(first.Users), len(emails))
	}
	hashes := map[string]bool{}
	for i, u := range first.Users {
		if want := strings.ToLower(emails[i]); u.Email != want || u.Created != (i > 0) || u.ID == "" || u.Token != "" {
			t.Errorf("result %d: %+v, want %s created %v, no session unasked", i, u, want, i > 0)
		}
		stored, err := e.stores.Users.UserByEmail(ctx, u.Email)
		if err != nil || stored.ID != u.ID {
			t.Fatalf("stored %+v (%v), answered %+v", stored, err, u)
		}
		if u.Created {
			hashes[stored.PasswordHash] = true
		}
	}
	if len(hashes) != 1 {
		t.Errorf("%d distinct password hashes among the created users, want 1 (the password hashed once)", len(hashes))
	}
	e.must(t, http.StatusOK, req{method: "POST", path: "/v1/admin/users", admin: testAdminToken,
		body: bulkBody("bulk password", emails...)}).json(t, &again)
	for i, u := range again.Users {
		if u.Created || u.ID != first.Users[i].ID {
			t.Errorf("repeated call, result %d: %+v, want the first call's id %s, not created", i, u, first.Users[i].ID)
		}
	}
	e.login(t, e.guest(t), "bulk-7@example.com", "bulk password")
	e.login(t, e.guest(t), "known@example.com", "known password")
}

// Each fault is a 400 naming its field, and a refused call writes nothing.
func TestBulkUsersValidation(t *testing.T) {
	e := newEnvWith(t, func(d *Deps) { d.BulkUsers = true })
	many := make([]string, 501)
	for i := range many {
		many[i] = fmt.Sprintf("m%d@example.com", i)
	}
	for _, c := range []struct {
		name  string
		body  any
		field string
	}{
		{"bad e-mail", bulkBody("bulk password", "a@example.com", "b@example.com", "c@example.com", "not an address"), "users.3.email"},
		{"weak password", bulkBody("short", "a@example.com"), "password"},
		{"no users", bulkBody("bulk password"), "users"},
		{"too many users", bulkBody("bulk password", many...), "users"},
		{"missing e-mail", map[string]any{"password": "bulk password", "users": []any{map[string]any{}}}, "users.0.email"},
		{"unknown member", map[string]any{"password": "bulk password", "users": []any{map[string]any{"email": "a@example.com", "name": "A"}}}, "users.0.name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := e.must(t, http.StatusBadRequest, req{method: "POST", path: "/v1/admin/users", admin: testAdminToken, body: c.body}).problem(t)
			if len(p.Errors) == 0 || p.Errors[0].Field != c.field {
				t.Errorf("problem %+v, want one naming %s", p, c.field)
			}
		})
	}
	for _, email := range []string{"a@example.com", "m0@example.com"} {
		if _, err := e.stores.Users.UserByEmail(context.Background(), email); err == nil {
			t.Errorf("a refused call created %s", email)
		}
	}
}
