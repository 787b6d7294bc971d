package triggers

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/opendlc/opendlc/schemas"
)

// S3 bucket notifications of the embedded stack's gateway arrive on
// schemas.S3RawEventSubject, which no workspace reader may subscribe to and which
// DLC_INBOUND keeps. The S3 router splits each notification's records by the workspace
// that owns the object (S3Owner, from the workspaces' storage locations) and publishes
// each workspace's records on its own subject, schemas.S3EventSubject(ws), where its
// triggers listen: a workspace's readers see only their own uploads. Records of objects
// that no workspace owns go to a fallback workspace (dlc up --s3-events-workspace).

// S3RouterConsumer is the router's durable consumer on DLC_INBOUND.
const S3RouterConsumer = "dlc-s3-router"

// S3Owner returns the workspace whose storage locations hold s3://bucket/key, false
// when none does.
type S3Owner func(ctx context.Context, bucket, key string) (string, bool, error)

// S3Router routes bucket notifications; Close stops it.
type S3Router struct {
	js       jetstream.JetStream
	owner    S3Owner
	fallback string
	log      *slog.Logger
	consume  jetstream.ConsumeContext
}

// StartS3Router starts routing the notifications on schemas.S3RawEventSubject.
func StartS3Router(ctx context.Context, js jetstream.JetStream, owner S3Owner, fallback string, log *slog.Logger) (*S3Router, error) {
	if log == nil {
		log = slog.Default()
	}
	r := &S3Router{js: js, owner: owner, fallback: fallback, log: log.With("component", "s3-router")}
	cons, err := js.CreateOrUpdateConsumer(ctx, InboundStream, jetstream.ConsumerConfig{
		Durable:       S3RouterConsumer,
		Description:   "OpenDLC S3 notifications to their workspaces",
		FilterSubject: schemas.S3RawEventSubject,
		DeliverPolicy: jetstream.DeliverNewPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxDeliver:    -1,
		MaxAckPending: 1,
	})
	if err == nil {
		r.consume, err = cons.Consume(r.handle)
	}
	if err != nil {
		return nil, fmt.Errorf("triggers: s3 router: %w", err)
	}
	return r, nil
}

// Close stops routing.
func (r *S3Router) Close() error {
	r.consume.Stop()
	return nil
}

func (r *S3Router) handle(msg jetstream.Msg) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.route(ctx, msg); err != nil {
		r.log.Error("S3 notification not routed; delivered again later", "error", err)
		_ = msg.NakWithDelay(time.Second)
		return
	}
	_ = msg.Ack()
}

func (r *S3Router) route(ctx context.Context, msg jetstream.Msg) error {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(msg.Data(), &doc); err != nil {
		r.log.Warn("ignoring a malformed S3 notification", "error", err)
		return nil
	}
	var records []json.RawMessage
	if err := json.Unmarshal(doc["Records"], &records); err != nil {
		r.log.Warn("ignoring an S3 notification without records", "error", err)
		return nil
	}
	var order []string
	byWS := map[string][]json.RawMessage{}
	for _, rec := range records {
		var obj struct {
			S3 struct {
				Bucket struct {
					Name string `json:"name"`
				} `json:"bucket"`
				Object struct {
					Key string `json:"key"`
				} `json:"object"`
			} `json:"s3"`
		}
		_ = json.Unmarshal(rec, &obj)
		ws, ok, err := r.owner(ctx, obj.S3.Bucket.Name, obj.S3.Object.Key)
		if err != nil {
			return err
		}
		if !ok {
			ws = r.fallback
		}
		if _, seen := byWS[ws]; !seen {
			order = append(order, ws)
		}
		byWS[ws] = append(byWS[ws], rec)
	}
	md, err := msg.Metadata()
	if err != nil {
		return err
	}
	for _, ws := range order {
		var err error
		if doc["Records"], err = json.Marshal(byWS[ws]); err != nil {
			return err
		}
		b, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		m := nats.NewMsg(schemas.S3EventSubject(ws))
		m.Data = b
		m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("s3route:%d:%s", md.Sequence.Stream, ws))
		if _, err := r.js.PublishMsg(ctx, m); err != nil {
			return fmt.Errorf("publish %s: %w", m.Subject, err)
		}
	}
	return nil
}

// OwnerByLocations is an S3Owner over the workspaces that names lists: the one whose
// location holds the object with the longest prefix (contains returns that prefix's
// length, or -1 when no location of ws holds uri).
func OwnerByLocations(names func(ctx context.Context) ([]string, error), contains func(ctx context.Context, ws, uri string) (int, error)) S3Owner {
	return func(ctx context.Context, bucket, key string) (string, bool, error) {
		if bucket == "" {
			return "", false, nil
		}
		wss, err := names(ctx)
		if err != nil {
			return "", false, err
		}
		best, bestLen := "", -1
		uri := "s3://" + bucket + "/" + key
		for _, ws := range wss {
			n, err := contains(ctx, ws, uri)
			if err != nil {
				return "", false, err
			}
			if n > bestLen {
				best, bestLen = ws, n
			}
		}
		return best, bestLen >= 0, nil
	}
}
