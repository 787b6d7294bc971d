package storage_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/storage"
)

// registry is a fixed workspace registry.
type registry map[string]api.Workspace

func (r registry) Workspace(_ context.Context, name string) (api.Workspace, bool, error) {
	ws, ok := r[name]
	return ws, ok, nil
}

// TestAccountsOnGateway provisions two workspaces' accounts on a real versitygw with
// its internal IAM, and checks what the gateway lets each do: its own prefix fully,
// the other's not at all (read, list, delete, overwrite), a listing of the whole bucket
// refused; provisioning again changes nothing.
func TestAccountsOnGateway(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	gw, err := devstack.StartS3(ctx, devstack.S3Options{Dir: t.TempDir() + "/s3", IAM: true, Buckets: []string{"dlc"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	reg := registry{"extra": {Name: "extra", Storage: &api.WorkspaceStorage{Locations: []string{"s3://extra-bucket"}}}}
	accts := &storage.Accounts{
		Gateway: storage.Gateway{Endpoint: gw.Endpoint, Region: gw.Region, Root: storage.Credentials{AccessKeyID: gw.AccessKey, SecretAccessKey: gw.SecretKey}},
		Key:     bytes.Repeat([]byte{7}, 32),
		Policy:  &storage.Policy{Root: "s3://dlc/workspaces", Workspaces: reg},
	}
	root := gw.Client()
	put(ctx, t, root, "dlc", "workspaces/b/ckpt/000000000001/MANIFEST.json", "b's manifest")
	put(ctx, t, root, "dlc", "workspaces/b/ckpt/000000000001/weights", "b's weights")
	put(ctx, t, root, "dlc", "elsewhere/x", "outside every workspace")

	ca, err := accts.Credentials(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := accts.Credentials(ctx, "a"); err != nil || again != ca {
		t.Fatalf("second Credentials(a) = %+v, %v; want the same pair", again, err)
	}
	if _, err := accts.Credentials(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	a := client(gw, ca)

	// A's own prefix: write, list, read, delete.
	put(ctx, t, a, "dlc", "workspaces/a/ckpt/000000000001/MANIFEST.json", "a's manifest")
	if _, err := a.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("dlc"), Prefix: aws.String("workspaces/a/ckpt/")}); err != nil {
		t.Fatalf("a lists its own prefix: %v", err)
	}
	if _, err := a.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("dlc"), Key: aws.String("workspaces/a/ckpt/000000000001/MANIFEST.json")}); err != nil {
		t.Fatalf("a reads its own object: %v", err)
	}

	// B's prefix and the rest of the bucket: refused.
	denied := map[string]error{}
	_, denied["get b"] = a.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("dlc"), Key: aws.String("workspaces/b/ckpt/000000000001/weights")})
	_, denied["list b"] = a.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("dlc"), Prefix: aws.String("workspaces/b/")})
	_, denied["list all"] = a.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("dlc")})
	_, denied["delete b"] = a.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("dlc"), Key: aws.String("workspaces/b/ckpt/000000000001/MANIFEST.json")})
	_, denied["overwrite b"] = a.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("dlc"), Key: aws.String("workspaces/b/ckpt/000000000001/weights"), Body: bytes.NewReader([]byte("x"))})
	_, denied["dotdot"] = a.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("dlc"), Key: aws.String("workspaces/a/../b/ckpt/000000000001/weights")})
	_, denied["get elsewhere"] = a.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("dlc"), Key: aws.String("elsewhere/x")})
	_, denied["policy"] = a.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String("dlc"), Policy: aws.String(`{"Version":"2012-10-17","Statement":[]}`)})
	_, denied["create bucket"] = a.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("a-own")})
	for what, err := range denied {
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "AccessDenied" {
			t.Errorf("%s as workspace a: %v; want AccessDenied", what, err)
		}
	}
	for key, want := range map[string]string{
		"workspaces/b/ckpt/000000000001/MANIFEST.json": "b's manifest",
		"workspaces/b/ckpt/000000000001/weights":       "b's weights",
	} {
		if got := get(ctx, t, root, "dlc", key); got != want {
			t.Errorf("%s = %q after a's attempts; want %q", key, got, want)
		}
	}

	// A workspace whose registry entry names a whole bucket gets it (created).
	ce, err := accts.Credentials(ctx, "extra")
	if err != nil {
		t.Fatal(err)
	}
	put(ctx, t, client(gw, ce), "extra-bucket", "any/key", "v")
	if _, err := client(gw, ce).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("dlc"), Key: aws.String("workspaces/extra/x")}); err == nil {
		t.Error("workspace extra reads the default location it was not given")
	}
}

func client(gw *devstack.S3, c storage.Credentials) *s3.Client {
	return s3.New(s3.Options{BaseEndpoint: aws.String(gw.Endpoint), Region: gw.Region, UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, ""),
		Retryer:     aws.NopRetryer{}})
}

func put(ctx context.Context, t *testing.T, c *s3.Client, bucket, key, body string) {
	t.Helper()
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader([]byte(body))}); err != nil {
		t.Fatalf("put %s/%s: %v", bucket, key, err)
	}
}

func get(ctx context.Context, t *testing.T, c *s3.Client, bucket, key string) string {
	t.Helper()
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("get %s/%s: %v", bucket, key, err)
	}
	defer out.Body.Close()
	b, _ := io.ReadAll(out.Body)
	return string(b)
}
