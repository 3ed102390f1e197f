package session

import (
	"context"
	"fmt"
	"time"
)

// Service starts and authenticates sessions.
type Service struct {
	Sessions Repository
	TTL      time.Duration
	Now      func() time.Time
}

// touchEvery limits last_active writes to one per minute per session.
const touchEvery = time.Minute

// Start creates an anonymous session and returns its bearer token.
func (s *Service) Start(ctx context.Context, ip, userAgent string) (string, Session, error) {
	return s.start(ctx, "", ip, userAgent)
}

// StartFor creates a session already bound to userID: login hands out a fresh token rather
// than promoting the guest's, so a token planted before login (session fixation) is worthless.
func (s *Service) StartFor(ctx context.Context, userID, ip, userAgent string) (string, Session, error) {
	return s.start(ctx, userID, ip, userAgent)
}

// Revoke ends the session at once.
func (s *Service) Revoke(ctx context.Context, id string) error {
	if err := s.Sessions.Revoke(ctx, id); err != nil {
		return fmt.Errorf("revoke session: %w", err)
	}
	return nil
}

func (s *Service) start(ctx context.Context, userID, ip, userAgent string) (string, Session, error) {
	token, id, err := NewToken()
	if err != nil {
		return "", Session{}, fmt.Errorf("new token: %w", err)
	}
	now := s.Now().UTC()
	if len(userAgent) > 256 {
		userAgent = userAgent[:256]
	}
	sess := Session{ID: id, UserID: userID, CreatedAt: now, LastActive: now, ExpiresAt: now.Add(s.TTL),
		IP: ip, UserAgent: userAgent, Status: StatusActive, Data: map[string]string{}}
	if err := s.Sessions.CreateSession(ctx, sess); err != nil {
		return "", Session{}, fmt.Errorf("create session: %w", err)
	}
	return token, sess, nil
}

// Authenticate resolves a bearer token to its live session.
func (s *Service) Authenticate(ctx context.Context, token string) (Session, error) {
	if token == "" || len(token) > 128 {
		return Session{}, ErrNotFound
	}
	now := s.Now().UTC()
	sess, err := s.Sessions.GetSession(ctx, IDFromToken(token), now)
	if err != nil {
		return Session{}, err
	}
	if now.Sub(sess.LastActive) >= touchEvery {
		if err := s.Sessions.Touch(ctx, sess.ID, now); err != nil {
			return Session{}, fmt.Errorf("touch session: %w", err)
		}
		sess.LastActive = now
	}
	return sess, nil
}
