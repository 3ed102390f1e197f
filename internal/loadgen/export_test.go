package loadgen

// Tokens are the users' bearer tokens, in the order of their e-mails.
func (s *Shop) Tokens() []string {
	out := make([]string, len(s.users))
	for i, u := range s.users {
		out[i] = u.token
	}
	return out
}
