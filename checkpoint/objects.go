package checkpoint

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// FirstModifiedAfter returns the key and modification time of the first object under uri
// (s3://bucket/prefix, listed in key order) that was modified strictly after t; found is
// false when there is none. Schedules use it to learn whether new data arrived since their
// previous run. It stops listing at the first such object. A bucket or prefix that holds
// nothing is not an error.
func (s *Store) FirstModifiedAfter(ctx context.Context, uri string, t time.Time) (key string, modified time.Time, found bool, err error) {
	bucket, prefix, err := ParseURI(uri)
	if err != nil {
		return "", time.Time{}, false, err
	}
	listPrefix := ""
	if prefix != "" {
		listPrefix = prefix + "/"
	}
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &listPrefix})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			if isNotFound(err) {
				return "", time.Time{}, false, nil
			}
			return "", time.Time{}, false, fmt.Errorf("checkpoint: list %s: %w", uri, err)
		}
		for _, obj := range page.Contents {
			if m := aws.ToTime(obj.LastModified); m.After(t) {
				return aws.ToString(obj.Key), m, true, nil
			}
		}
	}
	return "", time.Time{}, false, nil
}

// ObjectInfo describes one S3 object.
type ObjectInfo struct {
	Size     int64
	Modified time.Time
	ETag     string
}

// StatObject describes the object uri (s3://bucket/key); found is false when there is
// none. The metrics file collectors use it to read an object again only when it changed.
func (s *Store) StatObject(ctx context.Context, uri string) (info ObjectInfo, found bool, err error) {
	bucket, key, err := ParseURI(uri)
	if err != nil {
		return ObjectInfo{}, false, err
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: &key})
	if isNotFound(err) {
		return ObjectInfo{}, false, nil
	}
	if err != nil {
		return ObjectInfo{}, false, fmt.Errorf("checkpoint: head %s: %w", uri, err)
	}
	return ObjectInfo{Size: aws.ToInt64(out.ContentLength), Modified: aws.ToTime(out.LastModified), ETag: aws.ToString(out.ETag)}, true, nil
}

// ReadObject returns the content of the object uri (s3://bucket/key).
func (s *Store) ReadObject(ctx context.Context, uri string) ([]byte, error) {
	bucket, key, err := ParseURI(uri)
	if err != nil {
		return nil, err
	}
	data, err := s.get(ctx, bucket, key)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: get %s: %w", uri, err)
	}
	return data, nil
}
