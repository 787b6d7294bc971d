//go:build !linux

package local

import "errors"

// SandboxAvailable returns why WithSandbox cannot run replicas here: it needs Linux.
func SandboxAvailable() error {
	return errors.New("the sandbox needs Linux namespaces")
}

func (s *sandbox) init([]string) error { return SandboxAvailable() }

func newNetns(string) error { return SandboxAvailable() }

func isNetns(string) bool { return false }

func removeNetns(string) error { return nil }

func (b *Backend) serveForwards(string) error { return nil }

func (b *Backend) closeForwards(string) {}
