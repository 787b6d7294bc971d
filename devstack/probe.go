package devstack

import (
	"context"
	"fmt"
	"net/http"
)

// ProbeHTTP gets url once and succeeds when it answers 200 OK: a readiness probe of
// an HTTP endpoint (the Temporal Web UI here, an API server's /healthz in the tests),
// for a caller that polls it.
func ProbeHTTP(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}
