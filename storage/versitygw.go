package storage

// One versitygw account per workspace, confined by bucket policies to the workspace's
// locations. versitygw's internal IAM (--iam-dir) stores accounts whose role "user"
// grants nothing of its own: such an account reaches a bucket it does not own only
// through the bucket's policy, which the gateway evaluates for every object key (the
// resource arn:aws:s3:::bucket/prefix*) and for listings (s3:prefix conditions). The
// accounts are created through the gateway's admin API (PATCH /create-user, signed
// with the root account), the policies with PutBucketPolicy.

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// Credentials are an S3 access key pair.
type Credentials struct {
	AccessKeyID, SecretAccessKey string
}

// Gateway is a versitygw gateway reached with its root account.
type Gateway struct {
	// Endpoint is the gateway's URL (its admin API is on the same port).
	Endpoint string
	// Region signs requests.
	Region string
	// Root is the root account's key pair.
	Root Credentials
	// HTTP is the client for admin calls; default http.DefaultClient.
	HTTP *http.Client
}

// Accounts gives each workspace its own gateway account (AccountName) whose secret is
// derived from Key, so any process holding Key gives a workspace the same credentials
// and nothing per workspace needs storing. Credentials creates the account and
// installs its bucket policy statements the first time it is asked for a workspace, or
// when the workspace's locations changed. It is safe for concurrent use.
type Accounts struct {
	Gateway Gateway
	// Key derives every workspace's secret (HMAC-SHA256 of the workspace name); keep it
	// like the admin token (a 0600 file). At least 32 bytes.
	Key []byte
	// Policy gives each workspace's locations.
	Policy *Policy

	mu   sync.Mutex
	done map[string]string // workspace → the locations last provisioned
}

// AccountName is the gateway access key id of a workspace's account.
func AccountName(workspace string) string { return "dlcws-" + workspace }

// secret derives a workspace's secret key from a.Key.
func (a *Accounts) secret(workspace string) string {
	m := hmac.New(sha256.New, a.Key)
	m.Write([]byte("opendlc s3 account\x00" + workspace))
	return hex.EncodeToString(m.Sum(nil))[:40]
}

// Credentials returns the workspace's account, creating it and writing its bucket
// policy statements first when needed. A workspace without locations (an unrestricted
// Policy) has no account: that is an error, so that no replica falls back to broader
// credentials.
func (a *Accounts) Credentials(ctx context.Context, workspace string) (Credentials, error) {
	if len(a.Key) < 32 {
		return Credentials{}, errors.New("storage: Accounts.Key must hold at least 32 bytes")
	}
	locs, err := a.Policy.Locations(ctx, workspace)
	if err != nil {
		return Credentials{}, err
	}
	if len(locs) == 0 {
		return Credentials{}, fmt.Errorf("storage: workspace %s has no storage locations (set a storage root or the workspace's storage.locations)", workspace)
	}
	creds := Credentials{AccessKeyID: AccountName(workspace), SecretAccessKey: a.secret(workspace)}
	a.mu.Lock()
	defer a.mu.Unlock()
	key := describe(locs)
	if a.done[workspace] == key {
		return creds, nil
	}
	if err := a.Gateway.ensureUser(ctx, creds); err != nil {
		return Credentials{}, fmt.Errorf("storage: account of workspace %s: %w", workspace, err)
	}
	if err := a.Gateway.grant(ctx, workspace, creds.AccessKeyID, locs); err != nil {
		return Credentials{}, fmt.Errorf("storage: bucket policy of workspace %s: %w", workspace, err)
	}
	if a.done == nil {
		a.done = map[string]string{}
	}
	a.done[workspace] = key
	return creds, nil
}

// account is the admin API's account document.
type account struct {
	XMLName xml.Name `xml:"Account"`
	Access  string   `xml:"Access"`
	Secret  string   `xml:"Secret"`
	Role    string   `xml:"Role"`
}

// mutableProps is the admin API's update-user document.
type mutableProps struct {
	XMLName xml.Name `xml:"MutableProps"`
	Secret  string   `xml:"Secret"`
	Role    string   `xml:"Role"`
}

// ensureUser creates the account with role "user", or resets its secret and role when
// it exists.
func (g *Gateway) ensureUser(ctx context.Context, c Credentials) error {
	err := g.admin(ctx, "/create-user", account{Access: c.AccessKeyID, Secret: c.SecretAccessKey, Role: "user"})
	if err == nil || !strings.Contains(err.Error(), "UserAlreadyExists") && !strings.Contains(err.Error(), "already exists") {
		return err
	}
	return g.admin(ctx, "/update-user?access="+c.AccessKeyID, mutableProps{Secret: c.SecretAccessKey, Role: "user"})
}

// admin sends one signed admin API request.
func (g *Gateway) admin(ctx context.Context, path string, doc any) error {
	body, err := xml.Marshal(doc)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPatch, strings.TrimSuffix(g.Endpoint, "/")+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	payload := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", payload)
	err = v4.NewSigner().SignHTTP(ctx, aws.Credentials{AccessKeyID: g.Root.AccessKeyID, SecretAccessKey: g.Root.SecretAccessKey},
		req, payload, "s3", cmp.Or(g.Region, "us-east-1"), time.Now())
	if err != nil {
		return err
	}
	resp, err := cmp.Or(g.HTTP, http.DefaultClient).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode >= 300 {
		return fmt.Errorf("admin %s: %s: %s", strings.SplitN(path, "?", 2)[0], resp.Status, bytes.TrimSpace(reply))
	}
	return nil
}

// Client is an S3 client of the gateway with the root account.
func (g *Gateway) Client() *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(g.Endpoint),
		Region:       cmp.Or(g.Region, "us-east-1"),
		Credentials:  credentials.NewStaticCredentialsProvider(g.Root.AccessKeyID, g.Root.SecretAccessKey, ""),
		UsePathStyle: true,
	})
}

// statement is one bucket policy statement.
type statement struct {
	Sid       string          `json:"Sid"`
	Effect    string          `json:"Effect"`
	Principal map[string]any  `json:"Principal"`
	Action    []string        `json:"Action"`
	Resource  []string        `json:"Resource"`
	Condition json.RawMessage `json:"Condition,omitempty"`
}

// objectActions are what a workspace's account may do to the objects of its locations.
var objectActions = []string{"s3:GetObject", "s3:PutObject", "s3:DeleteObject",
	"s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"}

// grant replaces the workspace's statements in the policy of each bucket of locs with
// ones for locs: the account may read, write and delete the objects under each
// location's prefix and list only with a prefix inside it. Buckets that do not exist
// are created (owned by the root account).
func (g *Gateway) grant(ctx context.Context, workspace, access string, locs []Location) error {
	c := g.Client()
	byBucket := map[string][]Location{}
	var buckets []string
	for _, l := range locs {
		if _, ok := byBucket[l.Bucket]; !ok {
			buckets = append(buckets, l.Bucket)
		}
		byBucket[l.Bucket] = append(byBucket[l.Bucket], l)
	}
	sidPrefix := AccountName(workspace) + "-"
	for _, b := range buckets {
		if err := ensureBucket(ctx, c, b); err != nil {
			return err
		}
		stmts, err := readPolicy(ctx, c, b)
		if err != nil {
			return err
		}
		stmts = slices.DeleteFunc(stmts, func(s json.RawMessage) bool {
			var hdr struct{ Sid string }
			return json.Unmarshal(s, &hdr) == nil && strings.HasPrefix(hdr.Sid, sidPrefix)
		})
		for i, l := range byBucket[b] {
			for _, s := range locationStatements(sidPrefix, i, access, l) {
				raw, err := json.Marshal(s)
				if err != nil {
					return err
				}
				stmts = append(stmts, raw)
			}
		}
		doc, err := json.Marshal(struct {
			Version   string            `json:"Version"`
			Statement []json.RawMessage `json:"Statement"`
		}{"2012-10-17", stmts})
		if err != nil {
			return err
		}
		if _, err := c.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String(b), Policy: aws.String(string(doc))}); err != nil {
			return fmt.Errorf("put policy of bucket %s: %w", b, err)
		}
	}
	return nil
}

// locationStatements are the statements that let access use l.
func locationStatements(sidPrefix string, i int, access string, l Location) []statement {
	principal := map[string]any{"AWS": access}
	list := statement{Sid: fmt.Sprintf("%slist-%d", sidPrefix, i), Effect: "Allow", Principal: principal,
		Action: []string{"s3:ListBucket"}, Resource: []string{"arn:aws:s3:::" + l.Bucket}}
	if l.Prefix != "" {
		cond, _ := json.Marshal(map[string]any{"StringLike": map[string]any{"s3:prefix": []string{l.Prefix + "*"}}})
		list.Condition = cond
	}
	return []statement{
		{Sid: fmt.Sprintf("%sobjects-%d", sidPrefix, i), Effect: "Allow", Principal: principal,
			Action: objectActions, Resource: []string{"arn:aws:s3:::" + l.Bucket + "/" + l.Prefix + "*"}},
		list,
	}
}

// readPolicy returns the statements of a bucket's policy; none when it has no policy.
func readPolicy(ctx context.Context, c *s3.Client, bucket string) ([]json.RawMessage, error) {
	out, err := c.GetBucketPolicy(ctx, &s3.GetBucketPolicyInput{Bucket: aws.String(bucket)})
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "NoSuchBucketPolicy" {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get policy of bucket %s: %w", bucket, err)
	}
	var doc struct {
		Statement []json.RawMessage `json:"Statement"`
	}
	if err := json.Unmarshal([]byte(aws.ToString(out.Policy)), &doc); err != nil {
		return nil, fmt.Errorf("policy of bucket %s: %w", bucket, err)
	}
	return doc.Statement, nil
}

// ensureBucket creates bucket unless it exists.
func ensureBucket(ctx context.Context, c *s3.Client, bucket string) error {
	_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	var owned *types.BucketAlreadyOwnedByYou
	var exists *types.BucketAlreadyExists
	if err != nil && !errors.As(err, &owned) && !errors.As(err, &exists) {
		return fmt.Errorf("create bucket %s: %w", bucket, err)
	}
	return nil
}
