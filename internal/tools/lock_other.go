//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package tools

import (
	"context"
	"errors"
)

func lockFile(context.Context, string) (func(), error) {
	return nil, errors.New("file locking is not supported on this platform")
}
