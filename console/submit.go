package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/schemas"
)

// docForm is a form that sends a document (YAML or JSON) to the API: the submit-a-job
// page's, and the apply forms of the triggers and notification rules pages. After a
// refusal it holds the document as written and the API's answer.
type docForm struct {
	// Action is the form's path; Kind names the document in the label; Button is the
	// submit button's text; ID prefixes the elements' ids.
	Action, Kind, Button, ID string
	Spec                     string
	// Status, Message and Details are the API's refusal: its status, message and the
	// field paths it names.
	Status  int
	Message string
	Details []schemas.FieldError
}

// refused fills in the API's refusal of the form's document. Only a client error
// (4xx but 401) is shown in the form; anything else is the handler's error.
func (f *docForm) refused(err error) bool {
	ae, ok := errors.AsType[*client.Error](err)
	if !ok || ae.Status == http.StatusUnauthorized || ae.Status < 400 || ae.Status >= http.StatusInternalServerError {
		return false
	}
	f.Status, f.Message, f.Details = ae.Status, ae.API.Message, ae.API.Details
	return true
}

// submitForm is the submit-a-job form of workspace ws.
func submitForm(ws, spec string) docForm {
	return docForm{Action: wsPath(ws, "submit"), Kind: "TrainingJob", Button: "Submit", ID: "submit", Spec: spec}
}

// sampleJob is the document the submit form starts with.
const sampleJob = `apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata:
  name: my-job
  workspace: %s
spec:
  framework: custom
  command: [sh, -c, "echo hello; echo dlc:metric step=1 loss=0.5"]
  roles:
    worker: {replicas: 1}
`

// newJobPage shows the submit-a-job form: a TrainingJob document in YAML or JSON.
func (c *Console) newJobPage(w http.ResponseWriter, r *http.Request, k *call) error {
	// The API answers for the workspace first: another workspace's form is its 404.
	if _, err := k.api.GetWorkspace(r.Context(), k.ws); err != nil {
		return err
	}
	return c.render(w, http.StatusOK, "submit", "", k.page("Submit a job", "jobs", submitForm(k.ws, fmt.Sprintf(sampleJob, k.ws))))
}

// submitJob submits the form's document through the API, in the page's workspace
// when the document names none, then shows the new job. A document the API refuses
// (invalid, another workspace, a name in use) shows the form again, as written, with
// the API's message and every field path it names.
func (c *Console) submitJob(w http.ResponseWriter, r *http.Request, k *call) error {
	return applyDoc(w, r, k, docApply[api.Job]{
		send: k.api.SubmitJob, form: submitForm, dir: "jobs",
		name: func(job *api.Job) string { return job.Spec.Metadata.Name },
		again: func(f docForm) error {
			return c.render(w, f.Status, "submit", "", k.page("Submit a job", "jobs", f))
		},
	})
}

// docApply is how a form's document of one kind goes to the API and where the answer
// leads.
type docApply[T any] struct {
	// send sends the document; name names what the API answers, under wsPath(ws, dir).
	send func(context.Context, []byte) (*T, error)
	name func(*T) string
	dir  string
	// form is the kind's form holding spec; again shows the page of a refused form.
	form  func(ws, spec string) docForm
	again func(docForm) error
}

// applyDoc sends the posted form's document through the API, in the page's workspace
// when the document names none, then shows what the API made. A document the API
// refuses (invalid, another workspace, a name in use) shows the form again, as written,
// with the API's message and every field path it names.
func applyDoc[T any](w http.ResponseWriter, r *http.Request, k *call, d docApply[T]) error {
	text := r.PostFormValue("spec")
	obj, err := d.send(r.Context(), inWorkspace(text, k.ws))
	if err == nil {
		http.Redirect(w, r, wsPath(k.ws, d.dir, d.name(obj)), http.StatusSeeOther)
		return nil
	}
	f := d.form(k.ws, text)
	if !f.refused(err) {
		return err
	}
	return d.again(f)
}

// inWorkspace returns the document text, with metadata.workspace set to ws when it
// is a YAML or JSON object that names no workspace. Anything else is sent as written:
// the API answers what is wrong with it, and refuses another workspace by name.
func inWorkspace(text, ws string) []byte {
	js, err := yaml.YAMLToJSON([]byte(text))
	if err != nil {
		return []byte(text)
	}
	var doc map[string]any
	if json.Unmarshal(js, &doc) != nil || doc == nil {
		return []byte(text)
	}
	meta, ok := doc["metadata"].(map[string]any)
	if !ok {
		if doc["metadata"] != nil {
			return []byte(text)
		}
		meta = map[string]any{}
		doc["metadata"] = meta
	}
	if w, _ := meta["workspace"].(string); strings.TrimSpace(w) != "" {
		return []byte(text)
	}
	meta["workspace"] = ws
	out, err := json.Marshal(doc)
	if err != nil {
		return []byte(text)
	}
	return out
}
