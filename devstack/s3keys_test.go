package devstack

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// The S3 gateway's root keys are its installation's own (issue 33, finding 3): generated
// on the first start into <Dir>-root-keys.json (mode 0600), the same after a restart on
// that Dir, others on another Dir; the gateway gets them in its environment, so its
// command line (/proc/<pid>/cmdline, which every local user reads) holds neither them
// nor the NATS password, and its log (0600) holds [REDACTED] where the gateway printed
// the NATS URL with its password (finding 6). The objects it writes are mode 0600 in
// directories 0700. The former fixed keys (dlcdev) are refused.
func TestS3RootKeysPerInstallation(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 2*time.Minute)
	dir := t.TempDir()
	n, err := StartNATS(ctx, NATSOptions{Dir: dir + "/nats", Secure: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	opts := S3Options{Dir: dir + "/s3", NATSURL: n.URLFor(NATSUserS3), Buckets: []string{"datasets"}}
	srv, err := StartS3(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	access, secret := srv.AccessKey, srv.SecretKey
	if len(access) != 20 || !strings.HasPrefix(access, "DLC") || len(secret) < 40 {
		t.Errorf("root keys %q and a secret of %d characters: want DLC and 17 more, and at least 40", access, len(secret))
	}
	if srv.KeysFile != dir+"/s3"+S3RootKeysSuffix {
		t.Errorf("KeysFile %s", srv.KeysFile)
	}
	if a, s, err := ReadS3RootKeys(dir + "/s3"); err != nil || a != access || s != secret {
		t.Errorf("ReadS3RootKeys: %q, %d characters, %v: not the gateway's", a, len(s), err)
	}
	if _, err := srv.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("datasets"), Key: aws.String("a/b.json"),
		Body: bytes.NewReader([]byte("{}"))}); err != nil {
		t.Fatal(err)
	}

	natsPassword := n.Password(NATSUserS3)
	secrets := map[string]string{"the root access key": access, "the root secret key": secret, "the gateway's NATS password": natsPassword}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(srv.proc.Pid()) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(cmdline, []byte("versitygw")) {
		t.Errorf("pid %d is not the gateway: %q", srv.proc.Pid(), cmdline)
	}
	log, err := os.ReadFile(dir + "/s3.log")
	if err != nil {
		t.Fatal(err)
	}
	for what, s := range secrets {
		if bytes.Contains(cmdline, []byte(s)) {
			t.Errorf("the gateway's command line holds %s", what)
		}
		if bytes.Contains(log, []byte(s)) {
			t.Errorf("the gateway's log holds %s:\n%s", what, log)
		}
	}
	if !bytes.Contains(log, []byte("_dlc_s3:[REDACTED]@")) {
		t.Errorf("the gateway's log does not show the NATS URL redacted:\n%s", log)
	}
	checkPrivate(t, dir, "s3", "s3.log", "s3"+S3RootKeysSuffix)

	// The keys of the fixed development account are refused.
	old := s3.New(s3.Options{BaseEndpoint: aws.String(srv.Endpoint), Region: srv.Region, UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("dlcdev", "dlcdev-secret-key", "")})
	if _, err := old.ListBuckets(ctx, &s3.ListBucketsInput{}); err == nil {
		t.Error("the former fixed keys dlcdev/dlcdev-secret-key still list the buckets")
	}

	// A restart on the same Dir keeps the keys; another Dir has others.
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := StartS3(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.AccessKey != access || again.SecretKey != secret {
		t.Error("the root keys changed across a restart on the same Dir")
	}
	other, err := StartS3(ctx, S3Options{Dir: dir + "/other"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if other.AccessKey == access || other.SecretKey == secret {
		t.Error("two installations have the same root keys")
	}
}

// checkPrivate checks that names in dir, and everything below them, are their user's
// alone: files mode 0600 or less, directories 0700, nothing for group and others.
func checkPrivate(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, name := range names {
		err := filepath.WalkDir(filepath.Join(dir, name), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if perm := fi.Mode().Perm(); perm&0o077 != 0 || (d.IsDir() && perm != 0o700) {
				t.Errorf("%s: mode %v, want 0600 for a file, 0700 for a directory", p, fi.Mode())
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	}
}
