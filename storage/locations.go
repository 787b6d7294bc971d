// Package storage confines each workspace to its own S3 locations.
//
// A workspace's locations are the S3 buckets and prefixes its documents may name
// (checkpoint.uri, checkpoint.resumeFrom, data URIs, skipIfNoNewDataUnder, s3:// metrics
// files, in every kind and every template). By default a workspace has one:
// <root>/<workspace>/, a prefix of the stack's bucket (Policy.Root); an administrator
// may set others in the workspace's registry entry (api.Workspace.Storage). Check finds
// every URI of a document and says which fields name a place outside the locations;
// the API service calls it when a document is submitted, and the worker again when a
// job launches.
//
// The gateway enforces the same confinement on the credentials replicas get: Provisioner
// gives every workspace its own versitygw account, and a bucket policy that lets the
// account reach only the workspace's locations (versitygw.go).
package storage

import (
	"fmt"
	"strings"
)

// Location is an S3 bucket, or a prefix of one, that a workspace may use.
type Location struct {
	// Bucket is the bucket's name.
	Bucket string
	// Prefix is "" for the whole bucket, else a key prefix ending in "/".
	Prefix string
}

// String returns the location as a URI, s3://bucket/prefix/ (s3://bucket for a whole
// bucket).
func (l Location) String() string {
	if l.Prefix == "" {
		return "s3://" + l.Bucket
	}
	return "s3://" + l.Bucket + "/" + l.Prefix
}

// ParseLocation parses s3://bucket or s3://bucket/prefix (a trailing "/" is implied).
// The prefix may not have empty, "." or ".." segments.
func ParseLocation(uri string) (Location, error) {
	bucket, key, err := splitURI(uri)
	if err != nil {
		return Location{}, err
	}
	key = strings.TrimSuffix(key, "/")
	if key == "" {
		return Location{Bucket: bucket}, nil
	}
	if err := checkSegments(key); err != nil {
		return Location{}, fmt.Errorf("%s: %w", uri, err)
	}
	return Location{Bucket: bucket, Prefix: key + "/"}, nil
}

// ParseLocations parses each URI (ParseLocation).
func ParseLocations(uris []string) ([]Location, error) {
	out := make([]Location, 0, len(uris))
	for _, u := range uris {
		l, err := ParseLocation(u)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// DefaultLocation is a workspace's location when its registry entry names none:
// root/<workspace>/, where root is s3://bucket or s3://bucket/prefix.
func DefaultLocation(root, workspace string) (Location, error) {
	l, err := ParseLocation(root)
	if err != nil {
		return Location{}, err
	}
	l.Prefix += workspace + "/"
	return l, nil
}

// Contains reports whether uri (s3://bucket/key) is inside l: the same bucket, and a
// key equal to l's prefix (without its "/") or below it. A key with empty, "." or ".."
// segments is never inside.
func (l Location) Contains(uri string) bool {
	bucket, key, err := splitURI(uri)
	if err != nil || bucket != l.Bucket {
		return false
	}
	if l.Prefix == "" {
		return key == "" || checkSegments(strings.TrimSuffix(key, "/")) == nil
	}
	if key != strings.TrimSuffix(l.Prefix, "/") && !strings.HasPrefix(key, l.Prefix) {
		return false
	}
	return checkSegments(strings.TrimSuffix(key, "/")) == nil
}

// Within reports whether uri is inside one of locs.
func Within(uri string, locs []Location) bool {
	for _, l := range locs {
		if l.Contains(uri) {
			return true
		}
	}
	return false
}

// mayExpandInto reports whether a template URI whose fixed part (before its first
// "${") is head can still end up inside one of locs once its parameters are
// substituted: head is inside a location, or is the start of one's URI.
func mayExpandInto(head string, locs []Location) bool {
	for _, l := range locs {
		u := l.String()
		if l.Prefix == "" {
			u += "/"
		}
		if strings.HasPrefix(u, head) {
			return true
		}
		if strings.HasPrefix(head, u) || head == strings.TrimSuffix(u, "/") {
			return true
		}
	}
	return false
}

// splitURI splits s3://bucket/key into bucket and key.
func splitURI(uri string) (bucket, key string, err error) {
	rest, ok := strings.CutPrefix(uri, "s3://")
	if !ok {
		return "", "", fmt.Errorf("%q is not an s3:// URI", uri)
	}
	bucket, key, _ = strings.Cut(rest, "/")
	if !validBucket(bucket) {
		return "", "", fmt.Errorf("%q: bucket name must be 3-63 lowercase letters, digits, '.' and '-'", uri)
	}
	return bucket, key, nil
}

// validBucket checks an S3 bucket name's characters and length.
func validBucket(b string) bool {
	if len(b) < 3 || len(b) > 63 {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return b[0] != '-' && b[0] != '.' && b[len(b)-1] != '-' && b[len(b)-1] != '.'
}

// checkSegments refuses keys with empty, "." or ".." segments: a gateway that stores
// objects as files may resolve them to another place than the key names.
func checkSegments(key string) error {
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "", ".", "..":
			return fmt.Errorf("key %q has an empty, \".\" or \"..\" segment", key)
		}
	}
	return nil
}
