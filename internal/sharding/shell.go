package sharding

import (
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

var identifier = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

// shellValue renders a BSON value as mongosh source, deterministically, so the
// plan shows a DBA exactly the documents apply sends.
func shellValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(x)
	case bool:
		return strconv.FormatBool(x)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int:
		return strconv.Itoa(x)
	case int64:
		return fmt.Sprintf("NumberLong(%q)", strconv.FormatInt(x, 10))
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bson.MinKey:
		return "MinKey"
	case bson.MaxKey:
		return "MaxKey"
	case bson.ObjectID:
		return fmt.Sprintf("ObjectId(%q)", hex.EncodeToString(x[:]))
	case bson.DateTime:
		return fmt.Sprintf("ISODate(%q)", x.Time().UTC().Format(time.RFC3339Nano))
	case time.Time:
		return fmt.Sprintf("ISODate(%q)", x.UTC().Format(time.RFC3339Nano))
	case bson.D:
		if len(x) == 0 {
			return "{}"
		}
		parts := make([]string, len(x))
		for i, e := range x {
			k := e.Key
			if !identifier.MatchString(k) {
				k = strconv.Quote(k)
			}
			parts[i] = k + ": " + shellValue(e.Value)
		}
		return "{ " + strings.Join(parts, ", ") + " }"
	case bson.A:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = shellValue(e)
		}
		return "[ " + strings.Join(parts, ", ") + " ]"
	default:
		return fmt.Sprintf("/* unsupported %T */ %v", v, v)
	}
}

// Shell renders a command as the mongosh line a DBA would paste: admin
// commands through db.adminCommand, the rest through the database.
func Shell(db string, cmd bson.D) string {
	if db == "admin" {
		return "db.adminCommand(" + shellValue(cmd) + ")"
	}
	return fmt.Sprintf("db.getSiblingDB(%q).runCommand(%s)", db, shellValue(cmd))
}
