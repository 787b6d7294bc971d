package devstack

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/opendlc/opendlc/internal/tools"
)

// DevRegion is the S3 gateway's region.
const DevRegion = "us-east-1"

// S3RootKeysSuffix names the file that keeps the gateway's root account keys, next to
// S3Options.Dir: <Dir>-root-keys.json (S3RootKeysFile).
const S3RootKeysSuffix = "-root-keys.json"

// DefaultEventSubject is the NATS subject S3 bucket notifications go to
// when S3Options.EventSubject is empty.
const DefaultEventSubject = "dlc.s3.events"

// s3ReadyTimeout bounds how long StartS3 waits for the gateway.
const s3ReadyTimeout = 30 * time.Second

// S3Options configures StartS3.
type S3Options struct {
	// Dir is the posix backend's root: each directory in it is a bucket. The
	// gateway's log goes next to it, to <Dir>.log.
	Dir string
	// Port is the S3 API port; 0 picks a free port.
	Port int
	// Host is the address the gateway listens on; default 127.0.0.1. Anything else
	// lets whoever can reach it try its root account's keys.
	Host string
	// NATSURL, when set, makes the gateway publish bucket notifications
	// (AWS event JSON, e.g. s3:ObjectCreated:Put) to NATS. It may hold a user and
	// password (NATS.URLFor): it reaches the gateway in its environment, not its
	// arguments, which every local user can read.
	NATSURL string
	// NATSCAFile is the CA of a NATS server that serves TLS (NATS.CAFile).
	NATSCAFile string
	// EventSubject is the NATS subject for notifications; default DefaultEventSubject.
	EventSubject string
	// Buckets are created at start; existing ones are kept as they are.
	Buckets []string
	// IAM runs the gateway's internal IAM service, its accounts kept in <Dir>-iam, so
	// that accounts other than the root one can be created (storage.Accounts). Without
	// it only the root account exists.
	IAM bool
}

// S3 is a running versitygw S3 gateway over a local directory.
type S3 struct {
	// Endpoint is the base URL, http://127.0.0.1:port (the listen host in place of
	// 127.0.0.1 when S3Options.Host names one); use path-style addressing.
	Endpoint string
	// AccessKey and SecretKey are the root account's keys, generated on the first
	// start on Dir and kept in S3RootKeysFile(Dir); Region is the gateway's. Clients
	// sign requests with them. Never print the secret key.
	AccessKey, SecretKey, Region string
	// KeysFile is the file that keeps AccessKey and SecretKey, S3RootKeysFile(Dir).
	KeysFile string
	// EventSubject is the NATS subject notifications go to, or "" when they are off.
	EventSubject string

	proc *process
}

// StartS3 builds (once) and starts versitygw with its posix backend on Dir,
// waits until it answers ListBuckets, and creates opts.Buckets. The root account's
// keys are generated into S3RootKeysFile(Dir) on the first start and read from there
// afterwards; the gateway gets them in its environment, never its arguments.
func StartS3(ctx context.Context, opts S3Options) (*S3, error) {
	dir, err := mkdir(opts.Dir)
	if err != nil {
		return nil, err
	}
	keys, err := loadS3RootKeys(S3RootKeysFile(dir), true)
	if err != nil {
		return nil, err
	}
	if opts.NATSURL != "" && opts.EventSubject == "" {
		opts.EventSubject = DefaultEventSubject
	}
	bin, err := tools.Ensure(ctx, "versitygw")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s3ReadyTimeout)
	defer cancel()

	s, err := startS3(ctx, bin, dir, keys, opts)
	if s != nil && s.proc.AddrInUse() && opts.Port == 0 {
		// The free port we found was taken before the gateway bound it.
		s, err = startS3(ctx, bin, dir, keys, opts)
	}
	if err != nil {
		return nil, err
	}
	if err := s.CreateBuckets(ctx, opts.Buckets...); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

// startS3 makes one attempt. On failure it returns the stopped S3 too, so
// the caller can look at why it failed.
func startS3(ctx context.Context, bin, dir string, keys s3RootKeys, opts S3Options) (*S3, error) {
	port, err := portOr(opts.Port)
	if err != nil {
		return nil, err
	}
	host := opts.Host
	if host == "" {
		host = "127.0.0.1"
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	// The root account's keys go in the environment (ROOT_ACCESS_KEY_ID and
	// ROOT_SECRET_ACCESS_KEY, versitygw's own variables for --access and --secret):
	// every local user can read a process's arguments, only its own user its
	// environment.
	args := []string{
		"--region", DevRegion,
		"--port", addr,
		"--quiet", // no per-request lines in the log
	}
	if opts.IAM {
		// Next to the posix root, not in it (each directory there is a bucket). No
		// cache: an account is used as soon as it is created or changed.
		iamDir, err := mkdir(dir + "-iam") // 0700: it holds the accounts' secrets
		if err != nil {
			return nil, err
		}
		args = append(args, "--iam-dir", iamDir, "--iam-cache-disable")
	}
	// Objects are the gateway's user's alone: its posix backend sets their modes itself
	// (0644 and 0755 by default, whatever the umask).
	args = append(args, "posix", "--dir-perms", "0700", "--file-perms", "0600", dir)

	s := &S3{
		Endpoint:     "http://" + net.JoinHostPort(dialHost(host), strconv.Itoa(port)),
		AccessKey:    keys.AccessKey,
		SecretKey:    keys.SecretKey,
		KeysFile:     S3RootKeysFile(dir),
		Region:       DevRegion,
		EventSubject: opts.EventSubject,
	}
	// Drop the gateway's own environment variables so a developer's shell
	// cannot add backends, IAM or listeners behind our flags.
	env := childEnv("VGW_", "ROOT_ACCESS_KEY", "ROOT_SECRET", "LOGFILE=", "WEBHOOK=", "SSL_CERT_FILE=")
	env = append(env, "ROOT_ACCESS_KEY_ID="+keys.AccessKey, "ROOT_SECRET_ACCESS_KEY="+keys.SecretKey)
	// The gateway prints the NATS URL, password and all, when it starts: its log
	// gets [REDACTED] in place of the password and of the root keys.
	redact := []string{keys.AccessKey, keys.SecretKey}
	if opts.NATSURL != "" {
		env = append(env, "VGW_EVENT_NATS_URL="+opts.NATSURL, "VGW_EVENT_NATS_TOPIC="+opts.EventSubject)
		if u, err := url.Parse(opts.NATSURL); err == nil && u.User != nil {
			pw, _ := u.User.Password()
			redact = append(redact, pw)
		}
	}
	if opts.NATSCAFile != "" {
		// Go programs take their root CAs from SSL_CERT_FILE.
		env = append(env, "SSL_CERT_FILE="+opts.NATSCAFile)
	}
	s.proc, err = startPrivate("versitygw", bin, args, dir+".log", env, redact...)
	if err != nil {
		return nil, err
	}
	noRetry := s.Client(func(o *s3.Options) { o.Retryer = aws.NopRetryer{} })
	err = s.proc.Poll(ctx, func(ctx context.Context) error {
		_, err := noRetry.ListBuckets(ctx, &s3.ListBucketsInput{})
		return err
	})
	if err != nil {
		return s, errors.Join(err, s.Close())
	}
	return s, nil
}

// dialHost is where clients on this host reach a server listening on host: loopback
// for the unspecified address (all interfaces), else host itself.
func dialHost(host string) string {
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return "127.0.0.1"
	}
	return host
}

// Client returns an S3 client for the gateway: static credentials,
// path-style addressing, no shared AWS config read from the environment.
func (s *S3) Client(optFns ...func(*s3.Options)) *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(s.Endpoint),
		Region:       s.Region,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
		UsePathStyle: true,
	}, optFns...)
}

// CreateBuckets creates each bucket that does not exist yet.
func (s *S3) CreateBuckets(ctx context.Context, names ...string) error {
	c := s.Client()
	for _, name := range names {
		_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)})
		var owned *types.BucketAlreadyOwnedByYou
		if err != nil && !errors.As(err, &owned) {
			return fmt.Errorf("devstack: create bucket %q: %w", name, err)
		}
	}
	return nil
}

// Close stops the gateway (SIGTERM, then SIGKILL after 5s). Objects stay in
// Dir.
func (s *S3) Close() error {
	if s == nil || s.proc == nil {
		return nil
	}
	return s.proc.Stop()
}

// S3RootKeysFile is the file that keeps the root account's keys of the gateway over
// dir (S3Options.Dir): <dir>-root-keys.json, mode 0600.
func S3RootKeysFile(dir string) string {
	return filepath.Clean(dir) + S3RootKeysSuffix
}

// ReadS3RootKeys reads the root account's keys of the gateway over dir
// (S3Options.Dir), as StartS3 generated them, for tools and tests that reach a stack's
// gateway from outside its process.
func ReadS3RootKeys(dir string) (accessKey, secretKey string, err error) {
	keys, err := loadS3RootKeys(S3RootKeysFile(dir), false)
	return keys.AccessKey, keys.SecretKey, err
}

// s3RootKeys is the content of S3RootKeysFile.
type s3RootKeys struct {
	AccessKey string `json:"accessKey"`
	SecretKey string `json:"secretKey"`
}

// loadS3RootKeys reads the root keys from path; with generate, it generates them there
// (mode 0600) when the file does not exist: an access key of 20 characters like AWS's
// ("DLC" and 17 random base32 ones, 85 bits) and a secret key of 52 random base32
// characters (260 bits). A file with looser modes is narrowed to 0600.
func loadS3RootKeys(path string, generate bool) (s3RootKeys, error) {
	var keys s3RootKeys
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist) && generate:
		keys = s3RootKeys{AccessKey: "DLC" + rand.Text()[:17], SecretKey: rand.Text() + rand.Text()}
		if b, err = json.MarshalIndent(keys, "", "  "); err != nil {
			return keys, err
		}
		if err := writePrivate(path, append(b, '\n')); err != nil {
			return keys, fmt.Errorf("devstack: S3 root keys: %w", err)
		}
		return keys, nil
	case err != nil:
		return keys, fmt.Errorf("devstack: S3 root keys: %w", err)
	}
	if err := json.Unmarshal(b, &keys); err != nil {
		return keys, fmt.Errorf("devstack: S3 root keys %s: %w", path, err)
	}
	if keys.AccessKey == "" || len(keys.SecretKey) < 32 {
		return keys, fmt.Errorf("devstack: %s does not hold the S3 root keys (accessKey, and a secretKey of 32 characters or more)", path)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return keys, fmt.Errorf("devstack: S3 root keys: %w", err)
	}
	return keys, nil
}
