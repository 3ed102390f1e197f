package httpapi

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/validation"
)

type productView struct {
	ID          string            `json:"id"`
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Active      bool              `json:"active"`
	Category    string            `json:"category"`
	Price       money.Amount      `json:"price"`
	Attributes  map[string]string `json:"attributes"`
	Stock       map[string]int64  `json:"stock"`
	CreatedAt   time.Time         `json:"created_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
}

func viewProduct(p catalog.Product) productView {
	v := productView{ID: p.ID, Name: p.Name, Description: p.Description, Active: !p.Inactive, Category: p.Category, Price: p.Price,
		Attributes: p.Attributes, Stock: p.Stock, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
	if v.Attributes == nil {
		v.Attributes = map[string]string{}
	}
	if v.Stock == nil {
		v.Stock = map[string]int64{}
	}
	return v
}

// listView is every paginated response: next_cursor is absent on the last page.
type listView[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
}

func listOf[S, T any](page paging.Page[S], view func(S) T) listView[T] {
	out := listView[T]{Items: make([]T, len(page.Items)), NextCursor: page.Next}
	for i, it := range page.Items {
		out.Items[i] = view(it)
	}
	return out
}

// queryValue reads a query parameter that the OpenAPI document declares as one value. Given
// twice it is refused, since a gateway and this server might each pick a different one. Given
// empty ("?date=") it is refused too: no parameter's schema allows "" but the cursor's, which
// pageParams reads with queryRaw, so an empty value is never mistaken for an absent one.
func queryValue(q url.Values, name string, c *validation.Collector) string {
	v, given := queryRaw(q, name, c)
	c.Check(!given || v != "", name, "must not be empty (leave the parameter out instead)")
	return v
}

// queryRaw is queryValue allowing the empty value; given says whether the parameter was sent.
func queryRaw(q url.Values, name string, c *validation.Collector) (v string, given bool) {
	vs := q[name]
	if len(vs) == 0 {
		return "", false
	}
	c.Check(len(vs) == 1, name, "must be given at most once")
	return vs[0], true
}

// pageParams reads limit and cursor; a bad limit names "limit".
func pageParams(q url.Values, c *validation.Collector) paging.Request {
	cursor, _ := queryRaw(q, "cursor", c) // empty: the first page
	req := paging.Request{Cursor: cursor}
	if l := queryValue(q, "limit", c); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > paging.MaxLimit {
			c.Add("limit", "must be an integer between 1 and 100")
		} else {
			req.Limit = n
		}
	}
	if !paging.ValidCursor(req.Cursor) {
		c.Add("cursor", "is not a cursor this server issued")
	}
	return req
}

// amountParam parses an optional money query parameter.
func amountParam(q url.Values, name string, c *validation.Collector) money.Amount {
	v := queryValue(q, name, c)
	if v == "" {
		return 0
	}
	a, err := money.Parse(v)
	if err != nil {
		c.Add(name, err.Error())
	}
	return a
}

func (s *server) searchProducts(w http.ResponseWriter, r *http.Request, _ *caller) error {
	q := r.URL.Query()
	var c validation.Collector
	search := catalog.Search{Category: queryValue(q, "category", &c)}
	search.MinPrice = amountParam(q, "min_price", &c)
	search.MaxPrice = amountParam(q, "max_price", &c)
	search.Sort = catalog.Sort(queryValue(q, "sort", &c))
	search.Page = pageParams(q, &c)
	if err := c.Err(); err != nil {
		return err
	}
	// The range is applied here for a newest-first listing (see newestInRange) and an empty
	// range (an upper bound below the lower) finds nothing: the store is asked neither.
	lo, hi := search.MinPrice, search.MaxPrice
	empty := hi != 0 && hi < lo
	ranged := search.Sort == catalog.SortNewest && (lo != 0 || hi != 0)
	if empty || ranged {
		search.MinPrice, search.MaxPrice = 0, 0
	}
	search, err := search.Validate()
	if err != nil {
		return err
	}
	var page paging.Page[catalog.Product]
	switch {
	case empty:
	case ranged:
		page, err = s.newestInRange(r, search, lo, hi)
	default:
		page, err = s.Catalog.SearchProducts(r.Context(), search)
	}
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, listOf(page, viewProduct))
}

// newestScan bounds how many products one newest-first request with a price range reads.
const newestScan = 1000

// newestInRange lists search's category newest first, keeping the products priced from lo to
// hi (0: no upper bound). The newest-first tables and indexes are ordered by creation alone,
// so the range filters the listing's pages; after newestScan products a page ends short (even
// empty) with a next_cursor instead of scanning the rest of a large category in one request.
func (s *server) newestInRange(r *http.Request, search catalog.Search, lo, hi money.Amount) (paging.Page[catalog.Product], error) {
	var out paging.Page[catalog.Product]
	want := search.Page.Limit
	search.Page.Limit = paging.MaxLimit
	for scanned := 0; ; {
		page, err := s.Catalog.SearchProducts(r.Context(), search)
		if err != nil {
			return out, err
		}
		for i, p := range page.Items {
			if p.Price < lo || (hi != 0 && p.Price > hi) {
				continue
			}
			out.Items = append(out.Items, p)
			if len(out.Items) == want {
				if i < len(page.Items)-1 || page.Next != "" {
					out.Next = paging.Encode(catalog.NewestCursor(p))
				}
				return out, nil
			}
		}
		scanned += len(page.Items)
		if page.Next == "" || scanned >= newestScan {
			out.Next = page.Next
			return out, nil
		}
		search.Page.Cursor = page.Next
	}
}

// pathID reads an id path value; one the ID pattern refuses is a 400 naming the parameter, as
// the OpenAPI document says, not a 404 for something that could never exist.
func pathID(r *http.Request, name string) (string, error) {
	id := r.PathValue(name)
	if !catalog.ValidID(id) {
		return "", badRequest(name, "must be 1-64 letters, digits, '-' or '_'")
	}
	return id, nil
}

func (s *server) getProduct(w http.ResponseWriter, r *http.Request, _ *caller) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	p, err := s.Catalog.GetProduct(r.Context(), id)
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, viewProduct(p))
}

// productInput is the body of POST /v1/products. Price is a decimal string, parsed here so a
// bad price names the "price" field. ID is a pointer so an empty id is refused, not generated.
type productInput struct {
	ID          *string           `json:"id,omitzero"`
	Name        string            `json:"name"`
	Description string            `json:"description,omitzero"`
	Active      *bool             `json:"active,omitzero"`
	Category    string            `json:"category"`
	Price       string            `json:"price"`
	Attributes  map[string]string `json:"attributes,omitzero"`
	Stock       map[string]int64  `json:"stock,omitzero"`
}

func (s *server) createProduct(w http.ResponseWriter, r *http.Request, _ *caller, in *productInput) error {
	var id string
	if in.ID != nil {
		id = *in.ID
	} else {
		v7, err := uuid.NewV7()
		if err != nil {
			return err
		}
		id = v7.String()
	}
	now := s.Now().UTC()
	p := catalog.Product{ID: id, Name: in.Name, Description: in.Description, Category: in.Category,
		Inactive: in.Active != nil && !*in.Active, Attributes: in.Attributes, Stock: in.Stock, CreatedAt: now, UpdatedAt: now}
	var c validation.Collector
	price, err := money.Parse(in.Price)
	if err != nil {
		c.Add("price", err.Error())
	}
	p.Price = price
	if err := joinValidation(c.Err(), p.Validate()); err != nil {
		return err
	}
	if err := s.Products.CreateProduct(r.Context(), p); err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/products/"+p.ID)
	return reply(w, http.StatusCreated, viewProduct(p))
}

// joinValidation merges field errors so a client sees every fault at once; a field named
// twice keeps its first (most specific) message.
func joinValidation(errs ...error) error {
	var c validation.Collector
	seen := map[string]bool{}
	for _, err := range errs {
		fields, _ := validation.Fields(err)
		for _, f := range fields {
			if !seen[f.Field] {
				seen[f.Field] = true
				c.Add(f.Field, f.Detail)
			}
		}
	}
	return c.Err()
}

// productPatch is a partial update: absent fields keep their value (null is refused by the
// decoder, so nil always means absent).
type productPatch struct {
	Name        *string            `json:"name,omitzero"`
	Description *string            `json:"description,omitzero"`
	Active      *bool              `json:"active,omitzero"`
	Category    *string            `json:"category,omitzero"`
	Price       *string            `json:"price,omitzero"`
	Attributes  *map[string]string `json:"attributes,omitzero"`
}

func (s *server) patchProduct(w http.ResponseWriter, r *http.Request, _ *caller, in *productPatch) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	patch := catalog.Patch{Name: in.Name, Description: in.Description, Category: in.Category, Attributes: in.Attributes, Active: in.Active}
	var c validation.Collector
	if in.Price != nil {
		if price, err := money.Parse(*in.Price); err != nil {
			c.Add("price", err.Error())
		} else {
			patch.Price = &price
		}
	}
	// Bad input is refused before the product is read: a 400 naming the field, never a 404
	// hiding it, and the store writes nothing.
	if err := joinValidation(c.Err(), patch.Validate()); err != nil {
		return err
	}
	now := s.Now().UTC()
	p, err := s.Products.UpdateProduct(r.Context(), id, func(p *catalog.Product) error {
		patch.Apply(p)
		p.UpdatedAt = now
		return nil
	})
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, viewProduct(p))
}

type stockInput struct {
	Zone  string `json:"zone"`
	Delta int64  `json:"delta"`
}

type stockView struct {
	ProductID string `json:"product_id"`
	Zone      string `json:"zone"`
	Stock     int64  `json:"stock"`
}

func (s *server) adjustStock(w http.ResponseWriter, r *http.Request, _ *caller, in *stockInput) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	var c validation.Collector
	c.Check(catalog.ValidSlug(in.Zone), "zone", "must be a zone slug such as \"eu-west\"")
	c.Check(in.Delta != 0 && in.Delta >= -catalog.MaxStock && in.Delta <= catalog.MaxStock,
		"delta", "must be a non-zero integer between -1000000000 and 1000000000")
	if err := c.Err(); err != nil {
		return err
	}
	ctx := r.Context()
	// The category completes the shard key, so the stock write stays targeted on MongoDB.
	p, err := s.Products.GetProduct(ctx, id)
	if err != nil {
		return err
	}
	level, err := s.Products.AdjustStock(ctx, p.Ref(), in.Zone, in.Delta)
	if err != nil {
		if prob, ok := stockProblem(err); ok {
			return prob
		}
		return err
	}
	return reply(w, http.StatusOK, stockView{ProductID: id, Zone: in.Zone, Stock: level})
}

// stockProblem names "delta" (not "items", as for an order) when an adjustment would go below
// zero; a refusal at the cap names "delta" already.
func stockProblem(err error) (*Problem, bool) {
	var short *catalog.InsufficientStockError
	if !errors.As(err, &short) {
		return nil, false
	}
	p, _ := toProblem(err)
	p.Errors = []validation.FieldError{{Field: "delta", Detail: "would take the stock below zero"}}
	return p, true
}
