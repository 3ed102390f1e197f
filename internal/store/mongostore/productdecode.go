package mongostore

import (
	"fmt"
	"math"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// UnmarshalBSON decodes a products document without the driver's reflection codec: a search
// page decodes 21 of them, and the codec cost about 4 µs each, 5–11 % over the raw driver
// (docs/evidence/benchmarks.md). The rules are the codec's: a number goes into cents only when it is
// whole (a fractional double written by hand is refused, never rounded), null is the zero value,
// unknown fields are ignored. TestProductDecoderMatchesTheCodec holds the two together.
func (d *productDoc) UnmarshalBSON(b []byte) error {
	*d = productDoc{}
	elems, err := bson.Raw(b).Elements()
	if err != nil {
		return fmt.Errorf("products document: %w", err)
	}
	for _, el := range elems {
		k, v := el.Key(), el.Value()
		if v.Type == bson.TypeNull || v.Type == bson.TypeUndefined {
			continue
		}
		switch k {
		case "_id":
			err = decodeString(k, v, &d.ID)
		case "category":
			err = decodeString(k, v, &d.Category)
		case "name":
			err = decodeString(k, v, &d.Name)
		case "description":
			err = decodeString(k, v, &d.Description)
		case "inactive":
			b, ok := v.BooleanOK()
			if !ok {
				err = fmt.Errorf("inactive: want a boolean, got %s", v.Type)
			}
			d.Inactive = b
		case "price":
			d.Price, err = wholeInt64(k, v)
		case "created_at":
			err = decodeTime(k, v, &d.CreatedAt)
		case "updated_at":
			err = decodeTime(k, v, &d.UpdatedAt)
		case "stock":
			err = d.decodeStock(v)
		case "attributes":
			err = d.decodeAttributes(v)
		}
		if err != nil {
			return fmt.Errorf("products document %q: %w", d.ID, err)
		}
	}
	return nil
}

func (d *productDoc) decodeStock(v bson.RawValue) error {
	doc, ok := v.DocumentOK()
	if !ok {
		return fmt.Errorf("stock is a %s, want a document", v.Type)
	}
	elems, err := doc.Elements()
	if err != nil {
		return fmt.Errorf("stock: %w", err)
	}
	d.Stock = make(map[string]int64, len(elems))
	for _, el := range elems {
		q, err := wholeInt64("stock."+el.Key(), el.Value())
		if err != nil {
			return err
		}
		d.Stock[el.Key()] = q
	}
	return nil
}

func (d *productDoc) decodeAttributes(v bson.RawValue) error {
	arr, ok := v.ArrayOK()
	if !ok {
		return fmt.Errorf("attributes is a %s, want an array", v.Type)
	}
	vals, err := arr.Values()
	if err != nil {
		return fmt.Errorf("attributes: %w", err)
	}
	d.Attributes = make([]kvDoc, 0, len(vals))
	for _, item := range vals {
		doc, ok := item.DocumentOK()
		if !ok {
			return fmt.Errorf("attribute is a %s, want {key, value}", item.Type)
		}
		var kv kvDoc
		if err := decodeString("attributes.key", doc.Lookup("key"), &kv.Key); err != nil {
			return err
		}
		if err := decodeString("attributes.value", doc.Lookup("value"), &kv.Value); err != nil {
			return err
		}
		d.Attributes = append(d.Attributes, kv)
	}
	return nil
}

func decodeString(field string, v bson.RawValue, dst *string) error {
	switch v.Type {
	case bson.TypeString:
		*dst = v.StringValue()
	case 0, bson.TypeNull: // absent (a Lookup miss) or null
		*dst = ""
	default:
		return fmt.Errorf("%s is a %s, want a string", field, v.Type)
	}
	return nil
}

func decodeTime(field string, v bson.RawValue, dst *time.Time) error {
	ms, ok := v.DateTimeOK()
	if !ok {
		return fmt.Errorf("%s is a %s, want a date", field, v.Type)
	}
	*dst = time.UnixMilli(ms).UTC()
	return nil
}

// wholeInt64 takes int32, int64, or a double without a fractional part in int64's range.
func wholeInt64(field string, v bson.RawValue) (int64, error) {
	switch v.Type {
	case bson.TypeInt64:
		return v.Int64(), nil
	case bson.TypeInt32:
		return int64(v.Int32()), nil
	case bson.TypeDouble:
		f := v.Double()
		if f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
			return 0, fmt.Errorf("%s is %v, a double with a fraction (or out of range): refused, never rounded", field, f)
		}
		return int64(f), nil
	}
	return 0, fmt.Errorf("%s is a %s, want an integer", field, v.Type)
}
