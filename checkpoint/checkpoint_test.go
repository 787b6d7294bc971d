package checkpoint

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseURI(t *testing.T) {
	tests := map[string]struct {
		uri        string
		wantBucket string
		wantPrefix string
		wantErr    string // substring; empty means no error
	}{
		"bucket and prefix":     {uri: "s3://ckpt/jobs/resnet", wantBucket: "ckpt", wantPrefix: "jobs/resnet"},
		"trailing slashes":      {uri: "s3://ckpt/resnet//", wantBucket: "ckpt", wantPrefix: "resnet"},
		"bucket root":           {uri: "s3://ckpt", wantBucket: "ckpt"},
		"bucket root slash":     {uri: "s3://ckpt/", wantBucket: "ckpt"},
		"dots and dashes":       {uri: "s3://my-bucket.v2/x", wantBucket: "my-bucket.v2", wantPrefix: "x"},
		"no scheme":             {uri: "ckpt/resnet", wantErr: "must start with s3://"},
		"other scheme":          {uri: "gs://ckpt/resnet", wantErr: "must start with s3://"},
		"upper-case scheme":     {uri: "S3://ckpt/resnet", wantErr: "must start with s3://"},
		"empty":                 {uri: "", wantErr: "must start with s3://"},
		"no bucket":             {uri: "s3:///resnet", wantErr: "missing bucket name"},
		"bucket too short":      {uri: "s3://ab/x", wantErr: "3 to 63 characters"},
		"bucket upper case":     {uri: "s3://Ckpt/x", wantErr: "lowercase letters"},
		"bucket underscore":     {uri: "s3://my_bucket/x", wantErr: "lowercase letters"},
		"bucket leading dash":   {uri: "s3://-ckpt/x", wantErr: "begin and end"},
		"double slash":          {uri: "s3://ckpt/a//b", wantErr: "empty path segment"},
		"dot-dot":               {uri: "s3://ckpt/a/../b", wantErr: `path segment ".."`},
		"single dot":            {uri: "s3://ckpt/./b", wantErr: `path segment "."`},
		"bucket name too long":  {uri: "s3://" + strings.Repeat("a", 64) + "/x", wantErr: "3 to 63 characters"},
		"bucket name max width": {uri: "s3://" + strings.Repeat("a", 63), wantBucket: strings.Repeat("a", 63)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			bucket, prefix, err := ParseURI(tc.uri)
			if parseFailed(t, "ParseURI", tc.uri, err, tc.wantErr) {
				return
			}
			if diff := cmp.Diff([]string{tc.wantBucket, tc.wantPrefix}, []string{bucket, prefix}); diff != "" {
				t.Errorf("ParseURI(%q) bucket, prefix (-want +got):\n%s", tc.uri, diff)
			}
		})
	}
}

// parseFailed checks the error of call(in): with wantErr set it must be an
// ErrInvalidURI containing wantErr, otherwise nil. It reports whether an error was
// wanted (and found), so that the caller checks the results only when none was.
func parseFailed(t *testing.T, call, in string, err error, wantErr string) bool {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) || !errors.Is(err, ErrInvalidURI) {
			t.Fatalf("%s(%q) error = %v, want ErrInvalidURI containing %q", call, in, err, wantErr)
		}
		return true
	}
	if err != nil {
		t.Fatalf("%s(%q): %v", call, in, err)
	}
	return false
}

func TestParseRef(t *testing.T) {
	tests := map[string]struct {
		ref      string
		wantURI  string
		wantStep int64
		wantErr  string
	}{
		"padded":          {ref: "s3://ckpt/jobs/a/000000000120", wantURI: "s3://ckpt/jobs/a", wantStep: 120},
		"unpadded":        {ref: "s3://ckpt/jobs/a/120", wantURI: "s3://ckpt/jobs/a", wantStep: 120},
		"trailing slash":  {ref: "s3://ckpt/a/000000000007/", wantURI: "s3://ckpt/a", wantStep: 7},
		"bucket root":     {ref: "s3://ckpt/000000000000", wantURI: "s3://ckpt", wantStep: 0},
		"no step":         {ref: "s3://ckpt/jobs/a", wantErr: `"a" is not a step number`},
		"negative step":   {ref: "s3://ckpt/a/-1", wantErr: "not a step number"},
		"signed step":     {ref: "s3://ckpt/a/+1", wantErr: "not a step number"},
		"bucket only":     {ref: "s3://ckpt", wantErr: "s3://bucket/prefix/<step>"},
		"no scheme":       {ref: "ckpt/a/1", wantErr: "s3://bucket/prefix/<step>"},
		"bad bucket":      {ref: "s3://CK/1", wantErr: "3 to 63 characters"},
		"step overflows":  {ref: "s3://ckpt/a/99999999999999999999", wantErr: "not a step number"},
		"empty reference": {ref: "", wantErr: "s3://bucket/prefix/<step>"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			uri, step, err := ParseRef(tc.ref)
			if parseFailed(t, "ParseRef", tc.ref, err, tc.wantErr) {
				return
			}
			if uri != tc.wantURI || step != tc.wantStep {
				t.Errorf("ParseRef(%q) = %q, %d; want %q, %d", tc.ref, uri, step, tc.wantURI, tc.wantStep)
			}
		})
	}
}

func TestRefForRoundTrips(t *testing.T) {
	tests := map[string]struct {
		uri  string
		step int64
		want string
	}{
		"zero":           {uri: "s3://ckpt/a", step: 0, want: "s3://ckpt/a/000000000000"},
		"padded":         {uri: "s3://ckpt/a", step: 120, want: "s3://ckpt/a/000000000120"},
		"trailing slash": {uri: "s3://ckpt/a/", step: 5, want: "s3://ckpt/a/000000000005"},
		"wider than pad": {uri: "s3://ckpt/a", step: 1234567890123, want: "s3://ckpt/a/1234567890123"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := RefFor(tc.uri, tc.step)
			if got != tc.want {
				t.Fatalf("RefFor(%q, %d) = %q, want %q", tc.uri, tc.step, got, tc.want)
			}
			uri, step, err := ParseRef(got)
			if err != nil {
				t.Fatal(err)
			}
			if uri != strings.TrimRight(tc.uri, "/") || step != tc.step {
				t.Errorf("ParseRef(%q) = %q, %d", got, uri, step)
			}
		})
	}
}

func TestConfigFromEnv(t *testing.T) {
	tests := map[string]struct {
		env  map[string]string
		want Config
	}{
		"nothing set": {want: Config{}},
		"custom endpoint is path style": {
			env: map[string]string{
				"DLC_S3_ENDPOINT": "http://127.0.0.1:7070", "AWS_REGION": "cn-north-1",
				"AWS_ACCESS_KEY_ID": "ak", "AWS_SECRET_ACCESS_KEY": "sk",
			},
			want: Config{Endpoint: "http://127.0.0.1:7070", Region: "cn-north-1", AccessKey: "ak", SecretKey: "sk", PathStyle: true},
		},
		"virtual-host style asked for": {
			env:  map[string]string{"DLC_S3_ENDPOINT": "https://oss.example", "DLC_S3_PATH_STYLE": "false"},
			want: Config{Endpoint: "https://oss.example"},
		},
		"path style on AWS": {
			env:  map[string]string{"DLC_S3_PATH_STYLE": "true"},
			want: Config{PathStyle: true},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, k := range []string{"DLC_S3_ENDPOINT", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "DLC_S3_PATH_STYLE"} {
				t.Setenv(k, tc.env[k])
			}
			if diff := cmp.Diff(tc.want, ConfigFromEnv()); diff != "" {
				t.Errorf("ConfigFromEnv() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSaveRejectsBadInput needs no server: Save checks its arguments before any request.
func TestSaveRejectsBadInput(t *testing.T) {
	s, err := NewStore(Config{Endpoint: "http://127.0.0.1:1", AccessKey: "ak", SecretKey: "sk", PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	ok := map[string][]byte{"w.json": []byte("{}")}
	tests := map[string]struct {
		uri     string
		step    int64
		files   map[string][]byte
		metrics map[string]float64
		wantErr string
	}{
		"bad uri":         {uri: "ckpt/a", files: ok, wantErr: "must start with s3://"},
		"negative step":   {uri: "s3://ckpt/a", step: -1, files: ok, wantErr: "step must be >= 0"},
		"manifest name":   {uri: "s3://ckpt/a", files: map[string][]byte{ManifestName: nil}, wantErr: "reserved"},
		"empty name":      {uri: "s3://ckpt/a", files: map[string][]byte{"": nil}, wantErr: "empty file name"},
		"escaping name":   {uri: "s3://ckpt/a", files: map[string][]byte{"../x": nil}, wantErr: `".."`},
		"absolute name":   {uri: "s3://ckpt/a", files: map[string][]byte{"/x": nil}, wantErr: "empty"},
		"NaN metric":      {uri: "s3://ckpt/a", files: ok, metrics: map[string]float64{"loss": math.NaN()}, wantErr: `metric "loss" is NaN`},
		"infinite metric": {uri: "s3://ckpt/a", files: ok, metrics: map[string]float64{"loss": math.Inf(1)}, wantErr: "must be finite"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := s.Save(context.Background(), tc.uri, tc.step, tc.files, tc.metrics)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.HasPrefix(err.Error(), "checkpoint: ") {
				t.Fatalf("Save error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
	if _, err := NewStore(Config{AccessKey: "ak"}); err == nil {
		t.Error("NewStore with an access key and no secret key: no error")
	}
}
