package auth

import (
	"slices"
	"strings"
	"testing"

	"github.com/opendlc/opendlc/api"
)

func TestValidateWorkspaceStorage(t *testing.T) {
	many := make([]string, maxStorageLocations+1)
	for i := range many {
		many[i] = "s3://dlc/p"
	}
	for name, tc := range map[string]struct {
		locs []string
		want []string
	}{
		"prefix and bucket": {locs: []string{"s3://dlc/teams/a/", "s3://team-a-data"}},
		"not s3":            {locs: []string{"/data"}, want: []string{"storage.locations[0]"}},
		"dot dot":           {locs: []string{"s3://dlc/ok", "s3://dlc/a/../b"}, want: []string{"storage.locations[1]"}},
		"bad bucket":        {locs: []string{"s3://Dlc/x"}, want: []string{"storage.locations[0]"}},
		"too long":          {locs: []string{"s3://dlc/" + strings.Repeat("x", 1100)}, want: []string{"storage.locations[0]"}},
		"too many":          {locs: many, want: []string{"storage.locations"}},
	} {
		errs := ValidateWorkspace(api.Workspace{Name: "a", Storage: &api.WorkspaceStorage{Locations: tc.locs}})
		if got := errs.Fields(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: fields %v, want %v (%v)", name, got, tc.want, errs)
		}
	}
}
