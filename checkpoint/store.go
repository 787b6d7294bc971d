package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// Store saves and reads checkpoints in S3. It is safe for concurrent use.
type Store struct {
	client *s3.Client
	now    func() time.Time

	// asyncMu guards queued: the last save SaveAsync queued for each location
	// ("bucket/prefix").
	asyncMu sync.Mutex
	queued  map[string]*Pending
}

// Option configures a Store.
type Option func(*Store) error

// WithClock sets the clock that stamps manifests. Default time.Now.
func WithClock(now func() time.Time) Option {
	return func(s *Store) error {
		if now == nil {
			return errors.New("checkpoint: WithClock: nil clock")
		}
		s.now = now
		return nil
	}
}

// NewStore returns a Store that talks to the S3 endpoint described by cfg.
func NewStore(cfg Config, opts ...Option) (*Store, error) {
	client, err := NewClient(cfg)
	if err != nil {
		return nil, err
	}
	s := &Store{client: client, now: time.Now}
	for _, opt := range opts {
		if err := opt(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Save writes the checkpoint of step under uri: every file, then the manifest. It returns
// the manifest, with Ref set. Saving a step that already exists replaces it: its manifest
// is deleted first, so the step reads as incomplete until the new one is written.
// Metrics must be finite numbers.
func (s *Store) Save(ctx context.Context, uri string, step int64, files map[string][]byte, metrics map[string]float64) (Manifest, error) {
	bucket, prefix, err := ParseURI(uri)
	if err != nil {
		return Manifest{}, err
	}
	if step < 0 {
		return Manifest{}, fmt.Errorf("checkpoint: save step %d: step must be >= 0", step)
	}
	for k, v := range metrics {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return Manifest{}, fmt.Errorf("checkpoint: save step %d: metric %q is %v; metrics must be finite", step, k, v)
		}
	}
	names := make([]string, 0, len(files))
	for name := range files {
		if err := checkFileName(name); err != nil {
			return Manifest{}, fmt.Errorf("checkpoint: save step %d: %w", step, err)
		}
		names = append(names, name)
	}
	sort.Strings(names)

	dir := joinKey(prefix, stepDir(step))
	manifestKey := joinKey(dir, ManifestName)
	ref := RefFor(uri, step)
	if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: &manifestKey}); err != nil && !isNotFound(err) {
		return Manifest{}, fmt.Errorf("checkpoint: save %s: delete old manifest: %w", ref, err)
	}

	m := Manifest{Step: step, Time: s.now().UTC(), Files: make([]File, 0, len(names)), Metrics: maps.Clone(metrics), Ref: ref}
	for _, name := range names {
		data := files[name]
		sum := sha256.Sum256(data)
		if err := s.put(ctx, bucket, joinKey(dir, name), data, ""); err != nil {
			return Manifest{}, fmt.Errorf("checkpoint: save %s: file %s: %w", ref, name, err)
		}
		m.Files = append(m.Files, File{Name: name, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])})
	}
	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Manifest{}, fmt.Errorf("checkpoint: save %s: encode manifest: %w", ref, err)
	}
	if err := s.put(ctx, bucket, manifestKey, body, "application/json"); err != nil {
		return Manifest{}, fmt.Errorf("checkpoint: save %s: manifest: %w", ref, err)
	}
	return m, nil
}

// List returns the manifests of every complete checkpoint under uri, oldest step first.
// A location that holds nothing (or a bucket prefix never written) gives an empty list.
func (s *Store) List(ctx context.Context, uri string) ([]Manifest, error) {
	bucket, prefix, steps, err := s.scanURI(ctx, uri, "list")
	if err != nil {
		return nil, err
	}
	var out []Manifest
	for _, st := range steps {
		if !st.complete {
			continue
		}
		m, err := s.readManifest(ctx, bucket, prefix, uri, st.step)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: list %s: %w", uri, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// Latest returns the manifest of the newest complete checkpoint under uri, or an error
// wrapping ErrNoCheckpoint when there is none. Its Ref is what to resume from.
func (s *Store) Latest(ctx context.Context, uri string) (Manifest, error) {
	bucket, prefix, steps, err := s.scanURI(ctx, uri, "latest")
	if err != nil {
		return Manifest{}, err
	}
	for _, step := range slices.Backward(steps) {
		if step.complete {
			m, err := s.readManifest(ctx, bucket, prefix, uri, step.step)
			if err != nil {
				return Manifest{}, fmt.Errorf("checkpoint: latest %s: %w", uri, err)
			}
			return m, nil
		}
	}
	return Manifest{}, fmt.Errorf("%w under %s", ErrNoCheckpoint, uri)
}

// Load reads the checkpoint named by ref (s3://bucket/prefix/<step>) and returns its
// manifest and files, keyed by name. Every file's size and SHA-256 are checked against the
// manifest; a mismatch gives an error wrapping ErrCorrupt. A step without a manifest gives
// an error wrapping ErrNoCheckpoint.
func (s *Store) Load(ctx context.Context, ref string) (Manifest, map[string][]byte, error) {
	uri, step, err := ParseRef(ref)
	if err != nil {
		return Manifest{}, nil, err
	}
	bucket, prefix, _ := ParseURI(uri) // ParseRef validated uri
	m, err := s.readManifest(ctx, bucket, prefix, uri, step)
	if isNotFound(err) {
		return Manifest{}, nil, fmt.Errorf("%w at %s: no %s (incomplete or missing)", ErrNoCheckpoint, ref, ManifestName)
	}
	if err != nil {
		return Manifest{}, nil, fmt.Errorf("checkpoint: load %s: %w", ref, err)
	}
	dir := joinKey(prefix, stepDir(step))
	files := make(map[string][]byte, len(m.Files))
	for _, f := range m.Files {
		data, err := s.get(ctx, bucket, joinKey(dir, f.Name))
		if err != nil {
			if isNotFound(err) {
				return Manifest{}, nil, fmt.Errorf("%w: %s: file %s listed in the manifest is missing", ErrCorrupt, m.Ref, f.Name)
			}
			return Manifest{}, nil, fmt.Errorf("checkpoint: load %s: file %s: %w", m.Ref, f.Name, err)
		}
		sum := sha256.Sum256(data)
		if int64(len(data)) != f.Size || hex.EncodeToString(sum[:]) != f.SHA256 {
			return Manifest{}, nil, fmt.Errorf("%w: %s: file %s has %d bytes with sha256 %x, the manifest says %d bytes with sha256 %s",
				ErrCorrupt, m.Ref, f.Name, len(data), sum, f.Size, f.SHA256)
		}
		files[f.Name] = data
	}
	return m, files, nil
}

// Prune deletes the oldest complete checkpoints under uri so that at most keep remain
// (keep <= 0 keeps them all), and every incomplete step older than the newest complete
// checkpoint: a save that died. Incomplete steps newer than that may be a save in progress
// and are left alone. A pruned checkpoint loses its manifest first, so it never reads as
// complete with files missing. Prune returns the steps it deleted, oldest first.
func (s *Store) Prune(ctx context.Context, uri string, keep int) ([]int64, error) {
	bucket, _, steps, err := s.scanURI(ctx, uri, "prune")
	if err != nil {
		return nil, err
	}
	var doomed []stepObjects
	complete := 0
	for _, st := range slices.Backward(steps) { // newest first

		switch {
		case st.complete:
			complete++
			if keep > 0 && complete > keep {
				doomed = append(doomed, st)
			}
		case complete > 0: // incomplete, older than a complete one
			doomed = append(doomed, st)
		}
	}
	slices.Reverse(doomed)
	var deleted []int64
	for _, st := range doomed {
		if err := s.deleteStep(ctx, bucket, st); err != nil {
			return deleted, fmt.Errorf("checkpoint: prune %s: step %d: %w", uri, st.step, err)
		}
		deleted = append(deleted, st.step)
	}
	return deleted, nil
}

// stepObjects is what one step directory holds, as found by a listing.
type stepObjects struct {
	step     int64
	complete bool     // it holds a manifest
	keys     []string // every object under the step directory, manifest included
}

// scan lists everything under prefix in one pass and groups it by step, oldest first.
// Objects outside step directories (names that are not all digits) are ignored.
// scanURI parses uri and scans the steps under it. A bad uri is an ErrInvalidURI; a
// failed scan is wrapped as "checkpoint: <op> <uri>".
func (s *Store) scanURI(ctx context.Context, uri, op string) (bucket, prefix string, steps []stepObjects, err error) {
	bucket, prefix, err = ParseURI(uri)
	if err != nil {
		return "", "", nil, err
	}
	if steps, err = s.scan(ctx, bucket, prefix); err != nil {
		return "", "", nil, fmt.Errorf("checkpoint: %s %s: %w", op, uri, err)
	}
	return bucket, prefix, steps, nil
}

func (s *Store) scan(ctx context.Context, bucket, prefix string) ([]stepObjects, error) {
	listPrefix := ""
	if prefix != "" {
		listPrefix = prefix + "/"
	}
	byStep := map[int64]*stepObjects{}
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &listPrefix})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, obj := range page.Contents {
			key := aws.ToString(obj.Key)
			dir, rest, _ := strings.Cut(strings.TrimPrefix(key, listPrefix), "/")
			step, ok := parseStep(dir)
			if !ok {
				continue
			}
			st := byStep[step]
			if st == nil {
				st = &stepObjects{step: step}
				byStep[step] = st
			}
			st.keys = append(st.keys, key)
			// Only the manifest at the canonical (padded) place counts, which is where
			// Load looks for it.
			if rest == ManifestName && dir == stepDir(step) {
				st.complete = true
			}
		}
	}
	out := make([]stepObjects, 0, len(byStep))
	for _, st := range byStep {
		out = append(out, *st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].step < out[j].step })
	return out, nil
}

// readManifest fetches and decodes the manifest of step, checking that it describes that
// step. A missing manifest gives an error for which isNotFound is true.
func (s *Store) readManifest(ctx context.Context, bucket, prefix, uri string, step int64) (Manifest, error) {
	key := joinKey(joinKey(prefix, stepDir(step)), ManifestName)
	body, err := s.get(ctx, bucket, key)
	if err != nil {
		return Manifest{}, err
	}
	var m Manifest
	if err := json.Unmarshal(body, &m); err != nil {
		return Manifest{}, fmt.Errorf("%w: s3://%s/%s: %w", ErrCorrupt, bucket, key, err)
	}
	if m.Step != step {
		return Manifest{}, fmt.Errorf("%w: s3://%s/%s: manifest says step %d", ErrCorrupt, bucket, key, m.Step)
	}
	m.Ref = RefFor(uri, step)
	return m, nil
}

// deleteStep removes one step directory, manifest first.
func (s *Store) deleteStep(ctx context.Context, bucket string, st stepObjects) error {
	var rest []types.ObjectIdentifier
	for _, key := range st.keys {
		if strings.HasSuffix(key, "/"+ManifestName) {
			if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: aws.String(key)}); err != nil && !isNotFound(err) {
				return fmt.Errorf("delete %s: %w", key, err)
			}
			continue
		}
		rest = append(rest, types.ObjectIdentifier{Key: aws.String(key)})
	}
	for len(rest) > 0 {
		batch := rest[:min(len(rest), 1000)] // the DeleteObjects limit
		rest = rest[len(batch):]
		out, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: &bucket,
			Delete: &types.Delete{Objects: batch, Quiet: aws.Bool(true)},
		})
		if err != nil {
			return err
		}
		for _, e := range out.Errors {
			if aws.ToString(e.Code) == "NoSuchKey" {
				continue
			}
			return fmt.Errorf("delete %s: %s: %s", aws.ToString(e.Key), aws.ToString(e.Code), aws.ToString(e.Message))
		}
	}
	return nil
}

func (s *Store) put(ctx context.Context, bucket, key string, data []byte, contentType string) error {
	in := &s3.PutObjectInput{
		Bucket:        &bucket,
		Key:           &key,
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	}
	if contentType != "" {
		in.ContentType = &contentType
	}
	_, err := s.client.PutObject(ctx, in)
	return err
}

func (s *Store) get(ctx context.Context, bucket, key string) ([]byte, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	return io.ReadAll(out.Body)
}

// isNotFound reports whether err says the object (or its bucket) does not exist.
func isNotFound(err error) bool {
	if err == nil {
		return false
	}
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return true
	}
	if apiErr, ok := errors.AsType[smithy.APIError](err); ok {
		switch apiErr.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return true
		}
	}
	return false
}

func joinKey(a, b string) string {
	if a == "" {
		return b
	}
	return a + "/" + b
}
