package runs

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"unicode/utf8"
)

// cursor is where a List page ends: the last record's place in the order of every
// list, newest first by (finished, uid), then kind and workspace, so that the order is
// total even for two records of one uid.
type cursor struct {
	Finished  int64 // UTC unix microseconds
	UID       string
	Kind      Kind
	Workspace string
}

// cursorVersion is the first byte of an encoded cursor.
const cursorVersion = 1

var cursorEncoding = base64.RawURLEncoding

// cursorOf is the cursor after r.
func cursorOf(r Record) cursor {
	return cursor{Finished: micros(r.Finished), UID: r.UID, Kind: r.Kind, Workspace: r.Workspace}
}

// encode is the cursor as an opaque token: unpadded base64url of a version byte, the
// finished time (8 bytes, big-endian) and the uid, kind and workspace, each prefixed by
// its length (uvarint).
func (c cursor) encode() string {
	b := []byte{cursorVersion}
	b = binary.BigEndian.AppendUint64(b, uint64(c.Finished))
	for _, s := range []string{c.UID, string(c.Kind), c.Workspace} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return cursorEncoding.EncodeToString(b)
}

var errBadCursor = errors.New("not a cursor of this store: pass the previous page's next, unchanged")

// decodeCursor reads a token made by encode.
func decodeCursor(token string) (cursor, error) {
	b, err := cursorEncoding.DecodeString(token)
	if err != nil || len(b) < 9 || b[0] != cursorVersion {
		return cursor{}, errBadCursor
	}
	c := cursor{Finished: int64(binary.BigEndian.Uint64(b[1:9]))}
	b = b[9:]
	var fields [3]string
	for i := range fields {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return cursor{}, errBadCursor
		}
		fields[i] = string(b[k : k+int(n)])
		if !utf8.ValidString(fields[i]) {
			return cursor{}, errBadCursor
		}
		b = b[k+int(n):]
	}
	if len(b) != 0 || fields[0] == "" || !Kind(fields[1]).Valid() || fields[2] == "" {
		return cursor{}, errBadCursor
	}
	c.UID, c.Kind, c.Workspace = fields[0], Kind(fields[1]), fields[2]
	return c, nil
}

// pathPrefix is how a lineage query's URI (Query.Checkpoint) matches: as a path
// prefix, at a '/' boundary. "s3://b/model" (or "s3://b/model/") matches
// "s3://b/model" itself and everything under "s3://b/model/", but not "s3://b/model2".
// It returns the URI to match exactly and the range [lo, hi) of the URIs under it in
// byte order ('0' follows '/'), which the store compares byte by byte.
func pathPrefix(uri string) (exact, lo, hi string) {
	exact = strings.TrimSuffix(uri, "/")
	if exact == "" { // "/": everything that starts with it
		return uri, "/", "0"
	}
	return exact, exact + "/", exact + "0"
}
