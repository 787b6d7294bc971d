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
