package integration

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/logarchive"
)

// archiveLines is how many lines each replica of the archive test's job prints.
const archiveLines = 40

// TestLogArchive runs a two-replica job on a stack with storage isolation. When the job
// ends its logs are archived, per replica, gzip-compressed, under the workspace's
// location; once the stream has dropped every line (purged from the stream, as its
// retention would drop them, and checked on the stream itself), the API and `dlc logs` still
// answer every line, per replica and together, from the archive. The archive objects
// are readable with the workspace's gateway account and refused to another
// workspace's; the janitor's sweep deletes them once they are older than the
// retention.
func TestLogArchive(t *testing.T) {
	t.Parallel()
	ctx := itest.Context(t, 6*time.Minute)
	dir := t.TempDir()
	e := itest.StartStack(t, ctx, embedded.Config{WorkDir: dir, StorageIsolation: true})
	c := itest.AdminClient(t, e)
	bin := dlcBinary(t)
	js, err := jetstream.Connect(e.Stack.NATS.URL, e.Stack.NATS.ClientOptions(devstack.NATSUserServer)...)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()

	const ws, other, name = "arch-a", "arch-b", "chatty"
	itest.Submit(t, ctx, c, itest.JobDoc(name, ws, fmt.Sprintf(`
  framework: custom
  command: [sh, -c, 'i=1; while [ $i -le %d ]; do echo "line $i of $DLC_ROLE-$DLC_REPLICA"; i=$((i+1)); done']
  roles: {worker: {replicas: 2}}
`, archiveLines)))
	job := itest.WaitJob(t, ctx, c, ws, name, "terminal with its logs archived", func(j *api.Job) bool {
		return j.Status.Phase.Terminal() && j.Status.LogArchive != ""
	})
	if job.Status.Phase != "Succeeded" {
		t.Fatalf("job ended %s: %s", job.Status.Phase, job.Status.Message)
	}
	wantDir := fmt.Sprintf("s3://dlc/workspaces/%s/logs/%s/%s/", ws, name, job.UID)
	if job.Status.LogArchive != wantDir {
		t.Fatalf("status.logArchive = %q, want %q", job.Status.LogArchive, wantDir)
	}

	// The stream drops the lines. Purged here rather than aged out by a short MaxAge
	// (retention itself is events/jetstream's test): the archive is written when the
	// job has ended, and a stream that keeps lines for seconds would race a loaded
	// machine's teardown.
	stream := func() int {
		n := 0
		if err := js.ReadUntil(ctx, jetstream.LogsStream, events.JobLogsFilter(ws, name), nil, func(string, []byte) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := stream(); n != 2*archiveLines {
		t.Fatalf("the stream holds %d of the job's lines when it has ended, want %d", n, 2*archiveLines)
	}
	logs, err := js.JetStream().Stream(ctx, jetstream.LogsStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := logs.Purge(ctx, natsjs.WithPurgeSubject(events.JobLogsFilter(ws, name))); err != nil {
		t.Fatal(err)
	}
	if n := stream(); n != 0 {
		t.Fatalf("%d of the job's lines are still in the stream after the purge", n)
	}

	// The API answers every line from the archive, per replica and together.
	for _, replica := range []string{"worker-0", "worker-1"} {
		recs := apiLogs(t, ctx, c, ws, name, replica)
		checkArchivedLines(t, recs, job.UID, replica)
	}
	all := apiLogs(t, ctx, c, ws, name, "")
	if len(all) != 2*archiveLines {
		t.Errorf("all replicas: %d records, want %d", len(all), 2*archiveLines)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Time.Before(all[i-1].Time) {
			t.Errorf("all replicas: record %d (%s) is older than the one before", i, all[i].Time)
			break
		}
	}

	// dlc logs prints them as it prints the stream's.
	cmd := exec.CommandContext(ctx, bin, "--server", e.APIURL, "-w", ws, "job", "logs", name, "--replica", "worker-1")
	cmd.Env = append(os.Environ(), "DLC_TOKEN="+e.AdminToken)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("dlc logs: %v\n%s", err, out)
	}
	for i := 1; i <= archiveLines; i++ {
		if want := fmt.Sprintf("[worker-1] line %d of worker-1\n", i); !strings.Contains(string(out), want) {
			t.Fatalf("dlc logs --replica worker-1 lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "worker-0") {
		t.Errorf("dlc logs --replica worker-1 printed worker-0's lines:\n%s", out)
	}

	// The archive objects: the workspace's account reads them, another's is refused.
	mine, err := e.S3CredentialsFor(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := e.S3CredentialsFor(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("workspaces/%s/logs/%s/%s/worker-0.log.gz", ws, name, job.UID)
	get := func(id, secret string) (*s3.GetObjectOutput, error) {
		cl := s3.New(s3.Options{BaseEndpoint: aws.String(e.Stack.S3.Endpoint), Region: e.Stack.S3.Region, UsePathStyle: true,
			Credentials: credentials.NewStaticCredentialsProvider(id, secret, "")})
		return cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("dlc"), Key: aws.String(key)})
	}
	obj, err := get(mine.AccessKeyID, mine.SecretAccessKey)
	if err != nil {
		t.Fatalf("%s's account reading %s: %v", ws, key, err)
	}
	zr, err := gzip.NewReader(obj.Body)
	if err != nil {
		t.Fatalf("%s is not gzip: %v", key, err)
	}
	var fromObject []events.LogRecord
	sc := bufio.NewScanner(zr)
	for sc.Scan() {
		var rec events.LogRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		fromObject = append(fromObject, rec)
	}
	_ = obj.Body.Close()
	checkArchivedLines(t, fromObject, job.UID, "worker-0")
	if _, err := get(theirs.AccessKeyID, theirs.SecretAccessKey); !isAccessDenied(err) {
		t.Errorf("%s's account reading %s: %v, want AccessDenied", other, key, err)
	}

	// Retention: a sweep deletes archives older than it.
	store, err := logarchive.New(e.S3Config())
	if err != nil {
		t.Fatal(err)
	}
	j := &logarchive.Janitor{Store: store, Retention: time.Millisecond,
		Roots: func(ctx context.Context) ([]string, error) {
			return store.WorkspaceRoots(ctx, embedded.DefaultStorageRoot)
		}}
	n, err := j.SweepOnce(ctx)
	if err != nil || n < 2 {
		t.Fatalf("sweep deleted %d objects (%v), want the job's 2", n, err)
	}
	if reps, err := store.Replicas(ctx, wantDir); err != nil || len(reps) != 0 {
		t.Errorf("after the sweep the archive holds %v (%v), want nothing", reps, err)
	}
}

// apiLogs reads a job's logs (one replica's, or all) through the API.
func apiLogs(t *testing.T, ctx context.Context, c *dlc.Client, ws, name, replica string) []events.LogRecord {
	t.Helper()
	var recs []events.LogRecord
	if err := c.Logs(ctx, ws, name, dlc.LogOptions{Replica: replica}, func(r events.LogRecord) error {
		recs = append(recs, r)
		return nil
	}); err != nil {
		t.Fatalf("logs %s: %v", replica, err)
	}
	return recs
}

// checkArchivedLines checks that recs are one replica's archiveLines lines, in order,
// each a complete record of the job's run.
func checkArchivedLines(t *testing.T, recs []events.LogRecord, uid, replica string) {
	t.Helper()
	if len(recs) != archiveLines {
		t.Fatalf("%s: %d records, want %d: %+v", replica, len(recs), archiveLines, recs)
	}
	for i, r := range recs {
		want := fmt.Sprintf("line %d of %s", i+1, replica)
		if r.Line != want || r.UID != uid || fmt.Sprintf("%s-%d", r.Role, r.Index) != replica || r.Time.IsZero() || r.Replica == "" {
			t.Fatalf("%s record %d: %+v, want line %q of run %s", replica, i, r, want, uid)
		}
	}
}
