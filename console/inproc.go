package console

import (
	"fmt"
	"io"
	"net/http"
	"sync"
)

// inProcess is an http.RoundTripper that answers a request by calling the API's
// handler in this process, streaming the answer through a pipe. The console reaches
// the API through it with the signed-in user's token, so every call it makes is
// authenticated, authorized and audited by the API's own code, exactly as a CLI call.
type inProcess struct {
	api http.Handler
	// remoteAddr is the browser's address, for the API's rate limits and audit records.
	remoteAddr string
}

// RoundTrip serves req on the API handler; it returns once the handler has written
// its status (or returned), and the body streams while the handler writes.
func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	sreq := req.Clone(req.Context())
	sreq.RemoteAddr = t.remoteAddr
	sreq.RequestURI = req.URL.RequestURI()
	sreq.Proto, sreq.ProtoMajor, sreq.ProtoMinor = "HTTP/1.1", 1, 1
	if sreq.Body == nil {
		sreq.Body = http.NoBody
	}
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			if v := recover(); v != nil {
				// As net/http does for a handler that panics: the answer fails.
				w.writeHeader(http.StatusInternalServerError)
				_ = pw.CloseWithError(fmt.Errorf("console: API handler panicked: %v", v))
				return
			}
			w.writeHeader(http.StatusOK)
			_ = pw.Close()
		}()
		t.api.ServeHTTP(w, sreq)
	}()
	<-w.ready
	return &http.Response{
		Status: http.StatusText(w.status), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: pr, ContentLength: -1, Request: req,
	}, nil
}

// pipeWriter is the http.ResponseWriter of an in-process call: headers and status go
// to the waiting RoundTrip, the body into the pipe.
type pipeWriter struct {
	header http.Header
	sent   http.Header
	status int
	pw     *io.PipeWriter
	once   sync.Once
	ready  chan struct{}
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) { w.writeHeader(code) }

func (w *pipeWriter) writeHeader(code int) {
	w.once.Do(func() {
		w.status = code
		w.sent = w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.writeHeader(http.StatusOK)
	return w.pw.Write(p)
}

// Flush does nothing: every Write reaches the reader at once.
func (w *pipeWriter) Flush() {}
