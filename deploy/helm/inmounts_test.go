package helm

import "testing"

// A flag's path is rewritten under the mount that holds it, once, whatever the
// order of the mounts; other arguments are left as they are.
func TestInMounts(t *testing.T) {
	mounts := map[string]string{
		"/tmp":                     "/tmp/T/004/tmp",
		"/etc/opendlc/admin-token": "/tmp/T/004/admin-token",
		"/etc/opendlc/nats-creds":  "/tmp/T/004/nats-creds",
	}
	for _, c := range []struct{ arg, want string }{
		{"--admin-token-file=/etc/opendlc/admin-token/admin-token", "--admin-token-file=/tmp/T/004/admin-token/admin-token"},
		{"--state-dir=/tmp", "--state-dir=/tmp/T/004/tmp"},
		{"--state-dir=/tmp/state", "--state-dir=/tmp/T/004/tmp/state"},
		{"--nats-creds=/etc/opendlc/nats-creds/user.creds", "--nats-creds=/tmp/T/004/nats-creds/user.creds"},
		{"/etc/opendlc/admin-token/admin-token", "/tmp/T/004/admin-token/admin-token"},
		{"--tmpdir=/tmpfoo", "--tmpdir=/tmpfoo"},
		{"--addr=127.0.0.1:0", "--addr=127.0.0.1:0"},
		{"server", "server"},
	} {
		// The map's order changes from one range to the next: ask many times.
		for range 50 {
			if got := inMounts(c.arg, mounts); got != c.want {
				t.Fatalf("inMounts(%q) = %q, want %q", c.arg, got, c.want)
			}
		}
	}
}
