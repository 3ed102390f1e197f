package httpapi

import (
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/validation"
)

type eventInput struct {
	Type      string            `json:"type"`
	ProductID *string           `json:"product_id"` // nil: absent; given, an ID as in the product's path
	Details   map[string]string `json:"details"`
}

type eventView struct {
	ID        string            `json:"id"`
	Type      event.Type        `json:"type"`
	ProductID string            `json:"product_id,omitempty"`
	Details   map[string]string `json:"details,omitempty"`
	At        time.Time         `json:"at"`
}

func viewEvent(e event.Event) eventView {
	return eventView{ID: e.ID, Type: e.Type, ProductID: e.ProductID, Details: e.Details, At: e.At}
}

// appendEvent records an event for the caller; the server sets actor, id and time, so nobody
// can write into another actor's stream.
func (s *server) appendEvent(w http.ResponseWriter, r *http.Request, c *caller, in *eventInput) error {
	if err := s.limitEvents(r, c); err != nil {
		return err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return err
	}
	e := event.Event{ID: id.String(), Actor: c.owner().Key(), Type: event.Type(in.Type),
		At: s.Now().UTC(), Details: in.Details}
	if in.ProductID != nil {
		if !catalog.ValidID(*in.ProductID) {
			return badRequest("product_id", "must be 1-64 letters, digits, '-' or '_'")
		}
		e.ProductID = *in.ProductID
	}
	if err := e.Validate(); err != nil {
		return err
	}
	if err := s.Events.AppendEvent(r.Context(), e); err != nil {
		return err
	}
	return reply(w, http.StatusCreated, viewEvent(e))
}

// listEvents reads the caller's own events of one UTC day (default today), newest first.
func (s *server) listEvents(w http.ResponseWriter, r *http.Request, c *caller) error {
	q := r.URL.Query()
	var vc validation.Collector
	day := event.Day(s.Now())
	if d := queryValue(q, "date", &vc); d != "" {
		t, err := time.Parse(time.DateOnly, d)
		if err != nil {
			vc.Add("date", "must be a date YYYY-MM-DD")
		}
		day = t
	}
	var typ event.Type
	if t := queryValue(q, "type", &vc); t != "" {
		var ok bool
		typ, ok = event.ParseType(t)
		vc.Check(ok, "type", "must be one of view, click, add_to_cart, search")
	}
	page := pageParams(q, &vc)
	if err := vc.Err(); err != nil {
		return err
	}
	page, err := page.Normalize()
	if err != nil {
		return err
	}
	res, err := s.Events.ListEvents(r.Context(), event.Query{Actor: c.owner().Key(), Day: day, Type: typ, Page: page})
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, listOf(res, viewEvent))
}
