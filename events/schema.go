package events

//go:generate go run ./internal/gen jsonschema

import (
	"encoding/json"
	"strings"

	"github.com/invopop/jsonschema"
)

// SchemaBaseID prefixes the $id of the event schemas.
const SchemaBaseID = "https://opendlc.io/schemas/events/"

// Schemas returns the JSON Schema files of the envelope (event.schema.json) and of each
// event type's data (<type>.schema.json), keyed by file name.
func Schemas() (map[string][]byte, error) {
	r := &jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true}
	out := map[string][]byte{}
	add := func(name, title string, v any) error {
		s := r.Reflect(v)
		s.ID = jsonschema.ID(SchemaBaseID + name)
		s.Title = title
		b, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return err
		}
		out[name] = append(b, '\n')
		return nil
	}
	if err := add("event.schema.json", "OpenDLC event envelope (CloudEvents 1.0, structured JSON)", &Event{}); err != nil {
		return nil, err
	}
	if err := add("log-record.schema.json", "OpenDLC log record", &LogRecord{}); err != nil {
		return nil, err
	}
	for _, t := range Types {
		if err := add(SchemaFile(t.Type), "data of "+t.Type, t.Data); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// SchemaFile is the schema file name of an event type's data.
func SchemaFile(typ string) string {
	return strings.TrimPrefix(typ, "opendlc.") + ".schema.json"
}
