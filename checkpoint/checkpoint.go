// Package checkpoint saves, lists, loads and prunes training checkpoints in S3.
//
// A checkpoint location is a URI s3://bucket/prefix. The checkpoint of step N lives under
// <uri>/<N padded to 12 digits>/ and holds the training code's files plus MANIFEST.json,
// which is written last: a step without a manifest is incomplete (the writer died or is
// still writing) and is never listed nor resumed from. The manifest records every file's
// size and SHA-256, so Load detects a damaged checkpoint instead of resuming from it.
//
// A Ref, the string s3://bucket/prefix/<padded step>, names one checkpoint; it is what
// DLC_RESUME_FROM holds.
//
// Save uploads while the caller waits; SaveAsync uploads in the background, one save at
// a time per location, in call order, so training continues while a checkpoint it has
// already serialized is written. Prune keeps the newest N complete checkpoints (a job's
// spec.checkpoint.keep); OpenDLC also prunes to that number once a job has succeeded.
package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ManifestName is the name of the file, written last, that makes a checkpoint complete.
const ManifestName = "MANIFEST.json"

// StepDigits is the width to which step numbers are zero-padded in object keys, so that
// keys list in step order.
const StepDigits = 12

var (
	// ErrNoCheckpoint is returned by Latest when a location holds no complete checkpoint,
	// and (wrapped) by Load when the referenced checkpoint has no manifest.
	ErrNoCheckpoint = errors.New("checkpoint: no complete checkpoint")
	// ErrInvalidURI is wrapped by every error about a malformed checkpoint URI or Ref.
	ErrInvalidURI = errors.New("checkpoint: invalid URI")
	// ErrCorrupt is wrapped by Load's error when a file's size or SHA-256 does not match
	// the manifest, or the manifest itself is unreadable.
	ErrCorrupt = errors.New("checkpoint: corrupt checkpoint")
)

// Manifest describes one complete checkpoint. It is stored as MANIFEST.json.
type Manifest struct {
	// Step is the training step the checkpoint was taken at.
	Step int64 `json:"step"`
	// Time is when the checkpoint was saved (UTC).
	Time time.Time `json:"time"`
	// Files lists the checkpoint's files, sorted by name.
	Files []File `json:"files"`
	// Metrics are optional figures the training code reported with the checkpoint.
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Ref is where this checkpoint lives (s3://bucket/prefix/<padded step>). It is filled
	// in when a manifest is saved or read, and not stored, so a copied checkpoint stays valid.
	Ref string `json:"-"`
}

// File is one file of a checkpoint, as recorded in its manifest.
type File struct {
	// Name is the file's path relative to the step directory, such as "weights.json" or
	// "shards/0.bin".
	Name string `json:"name"`
	// Size is the file's length in bytes.
	Size int64 `json:"size"`
	// SHA256 is the lowercase hex SHA-256 of the file's content.
	SHA256 string `json:"sha256"`
}

// Config says how to reach S3. Empty fields fall back to the AWS SDK's defaults (its
// environment variables, shared config files, instance roles).
type Config struct {
	// Endpoint is the S3 endpoint URL, such as http://127.0.0.1:7070; empty means AWS.
	// With an endpoint set, the SDK's optional CRC checksums are off (only those S3
	// requires are sent), for the sake of S3-compatible stores.
	Endpoint string
	// Region signs requests; default us-east-1.
	Region string
	// AccessKey and SecretKey are static credentials; when both are empty the SDK's
	// default credential chain is used.
	AccessKey string
	SecretKey string
	// PathStyle addresses buckets as endpoint/bucket rather than bucket.endpoint, which
	// gateways such as versitygw and MinIO need.
	PathStyle bool
}

// ConfigFromEnv reads the S3 settings that OpenDLC gives training code: DLC_S3_ENDPOINT,
// AWS_REGION, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY. PathStyle is on when an endpoint
// is set, unless DLC_S3_PATH_STYLE says otherwise ("false", "0"...).
func ConfigFromEnv() Config {
	cfg := Config{
		Endpoint:  os.Getenv("DLC_S3_ENDPOINT"),
		Region:    os.Getenv("AWS_REGION"),
		AccessKey: os.Getenv("AWS_ACCESS_KEY_ID"),
		SecretKey: os.Getenv("AWS_SECRET_ACCESS_KEY"),
	}
	cfg.PathStyle = cfg.Endpoint != ""
	if v, err := strconv.ParseBool(os.Getenv("DLC_S3_PATH_STYLE")); err == nil {
		cfg.PathStyle = v
	}
	return cfg
}

// ParseURI splits a checkpoint location s3://bucket/prefix into its bucket and its prefix
// (without leading or trailing slashes; empty for the bucket's root).
func ParseURI(uri string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(uri, "s3://")
	if !ok {
		return "", "", fmt.Errorf("%w %q: must start with s3://", ErrInvalidURI, uri)
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	if err := checkBucket(bucket); err != nil {
		return "", "", fmt.Errorf("%w %q: %w", ErrInvalidURI, uri, err)
	}
	prefix = strings.TrimRight(prefix, "/")
	if prefix == "" {
		return bucket, "", nil
	}
	for seg := range strings.SplitSeq(prefix, "/") {
		switch seg {
		case "":
			return "", "", fmt.Errorf("%w %q: empty path segment (\"//\")", ErrInvalidURI, uri)
		case ".", "..":
			return "", "", fmt.Errorf("%w %q: path segment %q is not allowed", ErrInvalidURI, uri, seg)
		}
	}
	return bucket, prefix, nil
}

// checkBucket applies S3's bucket naming rules, so a typo fails here rather than as an
// opaque error from the server.
func checkBucket(b string) error {
	if b == "" {
		return errors.New("missing bucket name")
	}
	if len(b) < 3 || len(b) > 63 {
		return fmt.Errorf("bucket name %q must be 3 to 63 characters long", b)
	}
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return fmt.Errorf("bucket name %q may only hold lowercase letters, digits, '-' and '.'", b)
		}
	}
	if !isAlnum(b[0]) || !isAlnum(b[len(b)-1]) {
		return fmt.Errorf("bucket name %q must begin and end with a letter or digit", b)
	}
	return nil
}

func isAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// RefFor returns the Ref of the checkpoint of step in the location uri. It does not check
// that uri is valid; Save and Load do.
func RefFor(uri string, step int64) string {
	return strings.TrimRight(uri, "/") + "/" + stepDir(step)
}

// ParseRef splits a Ref s3://bucket/prefix/<step> into its location and step. The step may
// be padded or not.
func ParseRef(ref string) (uri string, step int64, err error) {
	trimmed := strings.TrimRight(ref, "/")
	i := strings.LastIndexByte(trimmed, '/')
	if !strings.HasPrefix(trimmed, "s3://") || i < len("s3://") {
		return "", 0, fmt.Errorf("%w %q: a checkpoint ref is s3://bucket/prefix/<step>", ErrInvalidURI, ref)
	}
	uri, last := trimmed[:i], trimmed[i+1:]
	step, ok := parseStep(last)
	if !ok {
		return "", 0, fmt.Errorf("%w %q: last path segment %q is not a step number", ErrInvalidURI, ref, last)
	}
	if _, _, err := ParseURI(uri); err != nil {
		return "", 0, err
	}
	return uri, step, nil
}

// stepDir is the zero-padded directory name of a step.
func stepDir(step int64) string { return fmt.Sprintf("%0*d", StepDigits, step) }

// parseStep reads a step directory name: decimal digits only, so that "-1", "+1" and
// "1e3" are not steps.
func parseStep(s string) (int64, bool) {
	if s == "" || len(s) > 19 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// checkFileName rejects names that would escape the step directory, collide with the
// manifest or make ambiguous keys.
func checkFileName(name string) error {
	if name == "" {
		return errors.New("empty file name")
	}
	if name == ManifestName {
		return fmt.Errorf("file name %q is reserved", name)
	}
	for seg := range strings.SplitSeq(name, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("file name %q: empty, \".\" or \"..\" path segment", name)
		}
	}
	return nil
}
