package webhook

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pw "github.com/xaalis/xaalis/pkg/webhook"
)

func devSender(timeout time.Duration) *Sender {
	return &Sender{Client: (&Policy{AllowInsecure: true}).Client(timeout)}
}

func TestSenderPosts(t *testing.T) {
	body := []byte(`{"event":"payment.success","data":{"id":"e1"}}`)
	sig := pw.Sign(body, []string{"whsec_a"}, time.Now())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || string(got) != string(body) ||
			r.Header.Get("Content-Type") != "application/json" || r.Header.Get("X-Xaalis-Signature") != sig ||
			r.Header.Get("User-Agent") != "Xaalis-Webhooks/1.0" {
			t.Errorf("request %s %q %v", r.Method, got, r.Header)
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	status, err := devSender(time.Second).Send(context.Background(), srv.URL, body, sig)
	if status != http.StatusAccepted || err != nil {
		t.Fatalf("Send = %d, %v", status, err)
	}
}

func TestSenderNon2xx(t *testing.T) {
	for _, code := range []int{http.StatusMovedPermanently, http.StatusBadRequest, http.StatusNotFound,
		http.StatusInternalServerError, http.StatusServiceUnavailable} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(code)
			io.WriteString(w, "nope")
		}))
		status, err := devSender(time.Second).Send(context.Background(), srv.URL, []byte(`{}`), "t=1,v1=00")
		srv.Close()
		var se *SendError
		if status != code || !errors.As(err, &se) || se.Status != code || err.Error() != "http "+strconv.Itoa(code) {
			t.Fatalf("%d: Send = %d, %v", code, status, err)
		}
	}
}

// A receiver that does not answer in time is a timeout, whether the
// client's timeout or the attempt's deadline ends it.
func TestSenderTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)

	start := time.Now()
	status, err := devSender(200*time.Millisecond).Send(context.Background(), srv.URL, []byte(`{}`), "t=1,v1=00")
	var se *SendError
	if status != 0 || !errors.As(err, &se) || !se.Timeout || err.Error() != "timeout" {
		t.Fatalf("client timeout: Send = %d, %v", status, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %v", d)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	status, err = devSender(0).Send(ctx, srv.URL, []byte(`{}`), "t=1,v1=00")
	if status != 0 || err == nil || err.Error() != "timeout" {
		t.Fatalf("deadline: Send = %d, %v", status, err)
	}
}

// The spec's 15 s: a receiver that hangs past it is a timeout.
func TestSenderDefaultTimeoutIs15s(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 15 s")
	}
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	start := time.Now()
	_, err := devSender(DefaultTimeout).Send(context.Background(), srv.URL, []byte(`{}`), "t=1,v1=00")
	d := time.Since(start)
	if err == nil || err.Error() != "timeout" || d < 15*time.Second || d > 18*time.Second {
		t.Fatalf("Send after %v: %v", d, err)
	}
}

func TestSenderConnectionFailures(t *testing.T) {
	// Nothing listens.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, err = devSender(time.Second).Send(context.Background(), "http://"+addr+"/", []byte(`{}`), "t=1,v1=00")
	if err == nil || !strings.HasPrefix(err.Error(), "connection failed: ") || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("refused: %v", err)
	}

	// The receiver drops the connection without answering.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			c.Close()
		}
	}))
	defer srv.Close()
	status, err := devSender(time.Second).Send(context.Background(), srv.URL, []byte(`{}`), "t=1,v1=00")
	if status != 0 || err == nil || !strings.HasPrefix(err.Error(), "connection failed: ") {
		t.Fatalf("dropped: %d, %v", status, err)
	}

	// The policy refuses the address.
	strict := &Sender{Client: (&Policy{}).Client(time.Second)}
	_, err = strict.Send(context.Background(), srv.URL, []byte(`{}`), "t=1,v1=00")
	var se *SendError
	if !errors.As(err, &se) || !se.Blocked || err.Error() != "refused: url host is a loopback address" {
		t.Fatalf("blocked: %v", err)
	}
	// The default Sender is strict.
	if _, err := (&Sender{}).Send(context.Background(), srv.URL, []byte(`{}`), "t=1,v1=00"); !errors.As(err, &se) || !se.Blocked {
		t.Fatalf("default sender: %v", err)
	}
}

// At most 64 KiB of an answer is read: a receiver streaming an endless
// answer does not hold the attempt.
func TestSenderReadsLittle(t *testing.T) {
	var wrote atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		chunk := make([]byte, 32<<10)
		for i := 0; i < 1<<12; i++ { // up to 128 MiB
			n, err := w.Write(chunk)
			wrote.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	start := time.Now()
	status, err := devSender(5*time.Second).Send(context.Background(), srv.URL, []byte(`{}`), "t=1,v1=00")
	if status != 200 || err != nil {
		t.Fatalf("Send = %d, %v", status, err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %v", d)
	}
}

func TestSenderUserAgent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("User-Agent") != "Custom/2" {
			w.WriteHeader(400)
		}
	}))
	defer srv.Close()
	s := devSender(time.Second)
	s.UserAgent = "Custom/2"
	if _, err := s.Send(context.Background(), srv.URL, nil, "t=1,v1=00"); err != nil {
		t.Fatal(err)
	}
}
