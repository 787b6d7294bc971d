package schemas

//go:generate go run ./cmd/gen-jsonschema -src . -out jsonschema
