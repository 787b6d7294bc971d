package console

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/opendlc/opendlc/client"
)

// pageFunc is a handler of a signed-in console page.
type pageFunc = func(http.ResponseWriter, *http.Request, *call) error

// docPages are the list, apply and delete pages of a kind of workspace document that
// the console edits as YAML: triggers and notification rules. Each kind's own page
// (what it shows of one document) stays with the kind.
type docPages[T any] struct {
	// dir is the kind's URL folder and its list page's template ("triggers").
	dir string
	// kind and id are the apply form's; title is the list page's.
	kind, id, title string
	// sample is the form's first document, with the workspace's name twice.
	sample string
	// list, apply and del are the kind's API calls; name names a document.
	list  func(*client.Client, context.Context, string) ([]T, error)
	apply func(*client.Client, context.Context, []byte) (*T, error)
	del   func(*client.Client, context.Context, string, string) error
	name  func(T) string
	// data is the list page's data: the documents, sorted by name, and the form.
	data func([]T, docForm) any
}

// form is the kind's apply form holding spec.
func (d *docPages[T]) form(ws, spec string) docForm {
	return docForm{Action: wsPath(ws, d.dir), Kind: d.kind, Button: "Apply", ID: d.id, Spec: spec}
}

// listPage lists the workspace's documents, with a form that applies one.
func (d *docPages[T]) listPage(c *Console) pageFunc {
	return func(w http.ResponseWriter, r *http.Request, k *call) error {
		return d.show(c, w, r, k, http.StatusOK, d.form(k.ws, fmt.Sprintf(d.sample, k.ws, k.ws)))
	}
}

func (d *docPages[T]) show(c *Console, w http.ResponseWriter, r *http.Request, k *call, status int, f docForm) error {
	items, err := d.list(k.api, r.Context(), k.ws)
	if err != nil {
		return err
	}
	slices.SortFunc(items, func(a, b T) int { return cmp.Compare(d.name(a), d.name(b)) })
	return c.render(w, status, d.dir, "", k.page(d.title, d.dir, d.data(items, f)))
}

// applyPage creates or replaces a document from the form's, then shows it; a document
// the API refuses shows the list again with the API's answer.
func (d *docPages[T]) applyPage(c *Console) pageFunc {
	return func(w http.ResponseWriter, r *http.Request, k *call) error {
		return applyDoc(w, r, k, docApply[T]{
			send: func(ctx context.Context, doc []byte) (*T, error) { return d.apply(k.api, ctx, doc) },
			form: d.form, dir: d.dir,
			name:  func(t *T) string { return d.name(*t) },
			again: func(f docForm) error { return d.show(c, w, r, k, f.Status, f) },
		})
	}
}

// deletePage deletes a document, then shows the list.
func (d *docPages[T]) deletePage(w http.ResponseWriter, r *http.Request, k *call) error {
	if err := d.del(k.api, r.Context(), k.ws, r.PathValue("name")); err != nil {
		return err
	}
	http.Redirect(w, r, wsPath(k.ws, d.dir), http.StatusSeeOther)
	return nil
}
