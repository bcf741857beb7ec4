package http

import (
	"crypto/tls"
	"log/slog"
	"net/http"
	"time"
)

// Timeouts are a listener's deadlines. ReadTimeout and WriteTimeout bound
// every ordinary request, so that a slow or stalled client cannot hold a
// connection and its goroutine; a long-lived response (Server-Sent
// Events) lifts them for itself with ExtendDeadlines.
type Timeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
}

// DefaultTimeouts are the API's and the admin listener's.
func DefaultTimeouts() Timeouts {
	return Timeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: 60 * time.Second, Idle: 120 * time.Second}
}

// NewHTTPServer is the http.Server of a listener: h behind the timeouts,
// a 64 KiB header bound, and the server's own errors in the log. tlsConfig
// may be nil.
func NewHTTPServer(h http.Handler, log *slog.Logger, t Timeouts, tlsConfig *tls.Config) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		TLSConfig:         tlsConfig,
	}
}

// ExtendDeadlines keeps a long-lived response (a Server-Sent Events
// stream) open past the listener's timeouts: it sets the write deadline d
// from now, and lifts the read deadline (which HTTP/2 keeps per stream,
// and HTTP/1.1 while a request body is unread). A stream calls it before
// its first write and again before each later write or heartbeat, so a
// client that stops reading is still cut off d after its last successful
// write, while ordinary requests keep WriteTimeout. The wrappers the
// server puts around the ResponseWriter unwrap, so
// http.ResponseController reaches the connection.
func ExtendDeadlines(w http.ResponseWriter, d time.Duration) error {
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Time{}); err != nil {
		return err
	}
	return rc.SetWriteDeadline(time.Now().Add(d))
}
