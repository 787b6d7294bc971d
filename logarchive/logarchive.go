// Package logarchive keeps a finished job's log records in S3, after the JetStream log
// stream has dropped them.
//
// When a job ends, the ArchiveLogs activity writes one object per replica (role and
// index, as `dlc job logs --replica` names it) under the job's workspace's storage location:
//
//	<location>logs/<job>/<uid>/<role>-<index>.log.gz
//
// each a gzip-compressed file of JSON lines, one events.LogRecord per line, in the order
// the stream held them. The API reads a finished job's logs back from there (Read), in
// the same format as from the stream. Sweep deletes archives older than a retention
// (versitygw does not implement S3 lifecycle rules, so the control plane expires them
// itself); Delete removes one job's archive (`dlc job delete --purge`).
package logarchive

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/opendlc/opendlc/checkpoint"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/storage"
)

// suffix ends every archive object's key.
const suffix = ".log.gz"

// Store reads and writes log archives in S3. It is safe for concurrent use.
type Store struct {
	client *s3.Client
}

// New returns a Store on the S3 endpoint described by cfg.
func New(cfg checkpoint.Config) (*Store, error) {
	c, err := checkpoint.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("logarchive: %w", err)
	}
	return &Store{client: c}, nil
}

// Dir is the URI of a job run's archive under a workspace location:
// <location>logs/<job>/<uid>/.
func Dir(loc storage.Location, job, uid string) string {
	return Root(loc) + job + "/" + uid + "/"
}

// Root is the URI under which every archive of a location lies: <location>logs/.
func Root(loc storage.Location) string {
	if loc.Prefix == "" {
		return loc.String() + "/logs/"
	}
	return loc.String() + "logs/"
}

// ReplicaName is how a replica's archive object is named: <role>-<index>.
func ReplicaName(role string, index int) string { return fmt.Sprintf("%s-%d", role, index) }

// Write stores one replica's records under dir as <replica>.log.gz, replacing what was
// there (a retried archive writes the same object again). It returns the object's URI.
func (s *Store) Write(ctx context.Context, dir, replica string, recs []events.LogRecord) (string, error) {
	bucket, prefix, err := split(dir)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	enc := json.NewEncoder(zw)
	for i := range recs {
		if err := enc.Encode(&recs[i]); err != nil {
			return "", fmt.Errorf("logarchive: encode: %w", err)
		}
	}
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("logarchive: compress: %w", err)
	}
	key := prefix + replica + suffix
	_, err = s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &bucket, Key: &key, Body: bytes.NewReader(buf.Bytes()),
		ContentLength: aws.Int64(int64(buf.Len())), ContentType: aws.String("application/gzip"),
	})
	if err != nil {
		return "", fmt.Errorf("logarchive: put s3://%s/%s: %w", bucket, key, err)
	}
	return "s3://" + bucket + "/" + key, nil
}

// Replicas lists the replicas archived under dir, sorted; none when there is no
// archive.
func (s *Store) Replicas(ctx context.Context, dir string) ([]string, error) {
	objs, err := s.list(ctx, dir)
	if err != nil {
		return nil, err
	}
	_, prefix, _ := split(dir)
	var out []string
	for _, o := range objs {
		name := strings.TrimPrefix(aws.ToString(o.Key), prefix)
		if strings.HasSuffix(name, suffix) && !strings.Contains(name, "/") {
			out = append(out, strings.TrimSuffix(name, suffix))
		}
	}
	sort.Strings(out)
	return out, nil
}

// Read delivers the records archived under dir to fn: one replica's (replica set, as
// <role>-<index>), or every replica's merged in time order (ties in replica order).
// It delivers nothing when the archive, or that replica, does not exist. fn may return
// an error to stop.
func (s *Store) Read(ctx context.Context, dir, replica string, fn func(events.LogRecord) error) error {
	replicas, err := s.Replicas(ctx, dir)
	if err != nil {
		return err
	}
	if replica != "" {
		if !slices.Contains(replicas, replica) {
			return nil
		}
		replicas = []string{replica}
	}
	bucket, prefix, _ := split(dir)
	h := &mergeHeap{}
	for i, r := range replicas {
		key := prefix + r + suffix
		out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
		if err != nil {
			h.close()
			return fmt.Errorf("logarchive: get s3://%s/%s: %w", bucket, key, err)
		}
		zr, err := gzip.NewReader(out.Body)
		if err != nil {
			_ = out.Body.Close()
			h.close()
			return fmt.Errorf("logarchive: s3://%s/%s: %w", bucket, key, err)
		}
		src := &source{order: i, body: out.Body, dec: json.NewDecoder(bufio.NewReader(zr))}
		if err := src.next(); err != nil {
			src.body.Close()
			if !errors.Is(err, io.EOF) {
				h.close()
				return err
			}
			continue
		}
		heap.Push(h, src)
	}
	defer h.close()
	for h.Len() > 0 {
		src := (*h)[0]
		if err := fn(src.rec); err != nil {
			return err
		}
		if err := src.next(); err != nil {
			heap.Pop(h)
			src.body.Close()
			if !errors.Is(err, io.EOF) {
				return err
			}
			continue
		}
		heap.Fix(h, 0)
	}
	return nil
}

// Delete removes every object under dir (one job run's archive).
func (s *Store) Delete(ctx context.Context, dir string) (int, error) {
	objs, err := s.list(ctx, dir)
	if err != nil {
		return 0, err
	}
	return s.remove(ctx, dir, objs)
}

// Sweep removes the archive objects under root (Root of a location) last written
// before cutoff, and returns how many it removed.
func (s *Store) Sweep(ctx context.Context, root string, cutoff time.Time) (int, error) {
	objs, err := s.list(ctx, root)
	if err != nil {
		return 0, err
	}
	var old []types.Object
	for _, o := range objs {
		if o.LastModified != nil && o.LastModified.Before(cutoff) && strings.HasSuffix(aws.ToString(o.Key), suffix) {
			old = append(old, o)
		}
	}
	return s.remove(ctx, root, old)
}

func (s *Store) remove(ctx context.Context, dir string, objs []types.Object) (int, error) {
	bucket, _, err := split(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, o := range objs {
		if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: o.Key}); err != nil && !isNotFound(err) {
			return n, fmt.Errorf("logarchive: delete s3://%s/%s: %w", bucket, aws.ToString(o.Key), err)
		}
		n++
	}
	return n, nil
}

// list lists every object under dir; a missing bucket lists nothing.
func (s *Store) list(ctx context.Context, dir string) ([]types.Object, error) {
	bucket, prefix, err := split(dir)
	if err != nil {
		return nil, err
	}
	var out []types.Object
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			if isNotFound(err) {
				return nil, nil
			}
			return nil, fmt.Errorf("logarchive: list %s: %w", dir, err)
		}
		out = append(out, page.Contents...)
	}
	return out, nil
}

// split reads s3://bucket/prefix/ into the bucket and the key prefix, which ends in
// "/" unless empty.
func split(uri string) (bucket, prefix string, err error) {
	bucket, prefix, err = checkpoint.ParseURI(uri)
	if err != nil {
		return "", "", fmt.Errorf("logarchive: %w", err)
	}
	if prefix != "" {
		prefix += "/"
	}
	return bucket, prefix, nil
}

func isNotFound(err error) bool {
	var nsb *types.NoSuchBucket
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	return errors.As(err, &nsb) || errors.As(err, &nsk) || errors.As(err, &nf)
}

// source is one replica's archive being read.
type source struct {
	order int
	body  io.Closer
	dec   *json.Decoder
	rec   events.LogRecord
}

func (s *source) next() error {
	s.rec = events.LogRecord{}
	if err := s.dec.Decode(&s.rec); err != nil {
		if errors.Is(err, io.EOF) {
			return io.EOF
		}
		return fmt.Errorf("logarchive: decode: %w", err)
	}
	return nil
}

// mergeHeap orders the sources by their current record's time, then by replica.
type mergeHeap []*source

func (h mergeHeap) Len() int { return len(h) }
func (h mergeHeap) Less(i, j int) bool {
	if !h[i].rec.Time.Equal(h[j].rec.Time) {
		return h[i].rec.Time.Before(h[j].rec.Time)
	}
	return h[i].order < h[j].order
}
func (h mergeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *mergeHeap) Push(x any)   { *h = append(*h, x.(*source)) }
func (h *mergeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (h *mergeHeap) close() {
	for _, s := range *h {
		_ = s.body.Close()
	}
	*h = nil
}
