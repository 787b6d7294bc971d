package service

import (
	"context"
	"slices"

	"go.temporal.io/sdk/temporal"

	"github.com/opendlc/opendlc/workflows"
)

// OwnerKey is the DlcOwner search attribute: the identity that started an object's
// workflow (the API token's name). Workflows that start children (trial jobs, pipeline
// steps, schedule runs) give them their own owner (workflows.StartSpec.ExecuteChild).
var OwnerKey = temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttrOwner)

type ownerKey struct{}

// WithOwner is ctx carrying owner, the identity the workflows started with ctx are
// listed under (DlcOwner). api/server sets it from the authenticated token; the trigger
// dispatcher from the trigger's owner.
func WithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// OwnerFrom is the owner ctx carries; empty when none.
func OwnerFrom(ctx context.Context) string {
	o, _ := ctx.Value(ownerKey{}).(string)
	return o
}

// withOwnerAttr is spec with DlcOwner set to ctx's owner, when it has one.
func withOwnerAttr(ctx context.Context, spec workflows.StartSpec) workflows.StartSpec {
	owner := OwnerFrom(ctx)
	if owner == "" {
		return spec
	}
	spec.Attrs = append(slices.Clip(spec.Attrs), OwnerKey.ValueSet(owner))
	return spec
}
