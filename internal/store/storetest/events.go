package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/paging"
)

// Events is the click-stream contract (EVT-1).
func Events(t *testing.T, newRepo func(t *testing.T) event.Repository) {
	ctx := context.Background()
	t.Run("EVT-1 events past the retention are purged, recent ones kept", func(t *testing.T) {
		t.Parallel()
		r := newRepo(t)
		actor := "u:" + uid("u")
		old := event.Event{ID: uid("e"), Actor: actor, Type: event.View, At: base.Add(-event.DefaultRetention - 24*time.Hour)}
		recent := event.Event{ID: uid("e"), Actor: actor, Type: event.View, At: base}
		for _, e := range []event.Event{old, recent} {
			if err := r.AppendEvent(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := r.PurgeEvents(ctx, base.Add(-event.DefaultRetention)); err != nil {
			t.Fatal(err)
		}
		gone, err := r.ListEvents(ctx, event.Query{Actor: actor, Day: old.At, Page: paging.Request{Limit: 10}})
		if err != nil || len(gone.Items) != 0 {
			t.Errorf("event past the retention: %d left, %v; want none", len(gone.Items), err)
		}
		kept, err := r.ListEvents(ctx, event.Query{Actor: actor, Day: recent.At, Page: paging.Request{Limit: 10}})
		if err != nil || len(kept.Items) != 1 || kept.Items[0].ID != recent.ID {
			t.Errorf("recent event: %+v, %v; want it kept", kept.Items, err)
		}
	})
	t.Run("EVT-1 day partition newest first with type filter and pages", func(t *testing.T) {
		t.Parallel()
		r := newRepo(t)
		actor, other := "u:"+uid("u"), "u:"+uid("u")
		day := event.Day(base)
		types := []event.Type{event.View, event.Click, event.View, event.AddToCart, event.Search, event.View}
		var ids []string
		for i, typ := range types {
			e := event.Event{ID: uid("e"), Actor: actor, Type: typ, At: day.Add(time.Duration(i) * time.Minute),
				ProductID: "p1", Details: map[string]string{"i": string(rune('0' + i))}}
			if err := r.AppendEvent(ctx, e); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, e.ID)
		}
		// Same instant twice: both kept.
		tie := day.Add(10 * time.Minute)
		for i := 0; i < 2; i++ {
			e := event.Event{ID: uid("e"), Actor: actor, Type: event.Click, At: tie}
			if err := r.AppendEvent(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		for _, e := range []event.Event{
			{ID: uid("e"), Actor: actor, Type: event.View, At: day.Add(-time.Minute)},     // the day before
			{ID: uid("e"), Actor: actor, Type: event.View, At: day.Add(24 * time.Hour)},   // the day after
			{ID: uid("e"), Actor: other, Type: event.View, At: day.Add(30 * time.Minute)}, // someone else
		} {
			if err := r.AppendEvent(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		q := event.Query{Actor: actor, Day: day.Add(5 * time.Hour), Page: paging.Request{Limit: 3}}
		var all []event.Event
		for i := 0; ; i++ {
			page, err := r.ListEvents(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, page.Items...)
			if page.Next == "" {
				break
			}
			if i > 10 {
				t.Fatal("pagination does not end")
			}
			q.Page.Cursor = page.Next
		}
		if len(all) != len(types)+2 {
			t.Fatalf("got %d events of the day, want %d", len(all), len(types)+2)
		}
		for i := 1; i < len(all); i++ {
			if all[i].At.After(all[i-1].At) {
				t.Errorf("event %d (%v) is newer than event %d (%v): want newest first", i, all[i].At, i-1, all[i-1].At)
			}
		}
		if all[len(all)-1].ID != ids[0] || all[len(all)-1].Details["i"] != "0" || all[len(all)-1].ProductID != "p1" {
			t.Errorf("oldest event: got %+v, want %s with details", all[len(all)-1], ids[0])
		}
		views, err := r.ListEvents(ctx, event.Query{Actor: actor, Day: day, Type: event.View, Page: paging.Request{Limit: 50}})
		if err != nil || len(views.Items) != 3 {
			t.Fatalf("views: got %d, %v; want 3", len(views.Items), err)
		}
		for _, e := range views.Items {
			if e.Type != event.View || e.Actor != actor {
				t.Errorf("filtered list holds %s of %s", e.Type, e.Actor)
			}
		}
	})
}
