package server

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/service"
)

// Every path and query parameter of the API is checked here, as the name it stands for,
// before the route is authorized and its handler runs: a workspace, an object name, a
// job, an event type... reach Temporal queries, workflow ids, NATS subjects and S3 keys
// only once they are known to be what they claim. A value that is not is answered 400,
// naming the parameter, and nothing is looked up: "job=>" is refused rather than turned
// into a subject wildcard.

// paramCheck returns "" for a valid value, else what the parameter expects.
type paramCheck func(string) string

// pathChecks are the checks of the path wildcards.
var pathChecks = map[string]paramCheck{
	"ws":   schemas.CheckWorkspaceName,
	"name": schemas.CheckObjectName,
	// trial is an experiment's trial ID (experiment_trials.go).
	"trial": intBetween(0, 1<<30),
}

var (
	eventTypeRE = regexp.MustCompile(`^[a-z][a-z0-9]*(\.[a-z0-9][-a-z0-9_]*)*$`)
	phaseRE     = regexp.MustCompile(`^[A-Z][A-Za-z]{0,31}$`)
	paramNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
)

// Bounds of free-form query values.
const (
	maxEventTypeLength = 128
	maxPageTokenLength = 4096
)

// queryChecks are the checks of the query parameters, by name. Every parameter a route
// declares has one (TestEveryQueryParamIsChecked). An empty value means the parameter
// is not set and is not checked.
var queryChecks = map[string]paramCheck{
	"workspace": func(v string) string {
		if v == api.AllWorkspaces {
			return ""
		}
		return schemas.CheckWorkspaceName(v)
	},
	"job":     schemas.CheckObjectName,
	"replica": schemas.CheckObjectName,
	"type": func(v string) string {
		if len(v) > maxEventTypeLength || !eventTypeRE.MatchString(v) {
			return fmt.Sprintf("must be an event type such as opendlc.job.phase.v1 (at most %d characters)", maxEventTypeLength)
		}
		return ""
	},
	"phase": func(v string) string {
		if !phaseRE.MatchString(v) {
			return "must be a phase such as Running or Succeeded"
		}
		return ""
	},
	"framework": func(v string) string {
		if schemas.CheckObjectName(v) != "" {
			return "must be a framework such as pytorch or custom"
		}
		return ""
	},
	"label": schemas.CheckLabelFilter,
	"since": func(v string) string {
		if d, err := time.ParseDuration(v); err != nil || d < 0 {
			return "must be a duration such as 10m or 24h"
		}
		return ""
	},
	"follow":         checkBool,
	"includeDeleted": checkBool,
	"purge":          checkBool,
	"uid": func(v string) string {
		if !uidRE.MatchString(v) {
			return "must be a job run's uid, as status and listings show it"
		}
		return ""
	},
	"limit": intBetween(1, 1000),
	"next":  intBetween(1, 100),
	"pageToken": func(v string) string {
		if len(v) > maxPageTokenLength {
			return fmt.Sprintf("must be the previous page's nextPageToken (at most %d bytes)", maxPageTokenLength)
		}
		// Its form here; its MAC when the list opens it (service/pagetoken.go).
		return service.CheckPageToken(v)
	},
	"param": func(v string) string {
		name, value, ok := strings.Cut(v, "=")
		if !ok || !paramNameRE.MatchString(name) {
			return "must be NAME=VALUE, NAME letters, digits and '_', not starting with a digit, at most 64 characters"
		}
		if err := schemas.CheckTemplateValue(name, value); err != nil {
			return err.Error()
		}
		return ""
	},
}

// checkBool checks a boolean parameter.
func checkBool(v string) string {
	switch v {
	case "true", "false", "1", "0":
		return ""
	}
	return "must be true or false"
}

func intBetween(lo, hi int) paramCheck {
	return func(v string) string {
		if n, err := strconv.Atoi(v); err != nil || n < lo || n > hi {
			return fmt.Sprintf("must be an integer between %d and %d", lo, hi)
		}
		return ""
	}
}

// checkParams checks the path wildcards and the declared query parameters of a call of
// rt. A parameter the route does not declare is ignored, as before.
func checkParams(rt *route, r *http.Request) error {
	for _, name := range pathParams(rt.path) {
		check := pathChecks[name]
		if check == nil {
			return fmt.Errorf("server: route %s: no check for path parameter {%s}", rt.pattern(), name)
		}
		if msg := check(r.PathValue(name)); msg != "" {
			return badRequest(fmt.Sprintf("invalid %s %s in the path", name, quoteShort(r.PathValue(name))), name, msg)
		}
	}
	if len(rt.query) == 0 {
		return nil
	}
	q := r.URL.Query()
	for _, p := range rt.query {
		check := queryChecks[p.name]
		if check == nil {
			return fmt.Errorf("server: route %s: no check for query parameter %s", rt.pattern(), p.name)
		}
		for _, v := range q[p.name] {
			if v == "" {
				continue
			}
			if msg := check(v); msg != "" {
				return badRequest(fmt.Sprintf("invalid query parameter %s=%s", p.name, quoteShort(v)), p.name, msg)
			}
		}
	}
	return nil
}

// quoteShort quotes v for an error message, cut to 64 bytes.
func quoteShort(v string) string {
	if len(v) > 64 {
		return strconv.Quote(v[:64]) + "..."
	}
	return strconv.Quote(v)
}

// refuseDotSegments answers 400 to a path with a "." or ".." segment (escaped or not),
// which ServeMux would otherwise redirect to another route's path: a name is never "."
// or "..", and a client that sends one gets an error, not another object.
func refuseDotSegments(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for seg := range strings.SplitSeq(r.URL.Path, "/") {
			if seg == "." || seg == ".." {
				writeError(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument,
					Message: fmt.Sprintf("invalid path %s: a \".\" or \"..\" segment names nothing", quoteShort(r.URL.Path)),
					Details: []schemas.FieldError{{Field: "path", Detail: "must not hold \".\" or \"..\" segments"}}})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
